package pgstore_test

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/internal/fixtures"
	"github.com/sourced-go/sourced/shell/driver"
	"github.com/sourced-go/sourced/shell/pgstore"
	"github.com/sourced-go/sourced/shell/pgstore/internal/pgtest"
	"github.com/sourced-go/sourced/shell/storetest"
)

// The store's sessions plan its statements once (plan_cache_mode =
// force_generic_plan), not at every call; a connection URL that names a
// plan_cache_mode keeps its own, given as a parameter or in options.
func TestSessionsUseGenericPlans(t *testing.T) {
	sep := "?"
	if strings.Contains(pgtest.URL(t), "?") {
		sep = "&"
	}
	reg, err := storetest.NewRegistry()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, url, want string
	}{
		{"default", pgtest.URL(t), "force_generic_plan"},
		{"named in the URL", pgtest.URL(t) + sep + "plan_cache_mode=force_custom_plan", "force_custom_plan"},
		{"named in options", pgtest.URL(t) + sep + "options=-c%20plan_cache_mode%3Dauto", "auto"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			s, err := pgstore.Install(ctx, c.url, pgstore.Options{Registry: reg, Prefix: pgtest.Prefix(), MaxConns: 2})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				if err := s.Uninstall(ctx); err != nil {
					t.Errorf("uninstall: %v", err)
				}
				s.Close()
			})
			var got string
			if err := s.View(ctx, func(tx pgx.Tx) error {
				return tx.QueryRow(ctx, "SHOW plan_cache_mode").Scan(&got)
			}); err != nil {
				t.Fatal(err)
			}
			if got != c.want {
				t.Errorf("plan_cache_mode = %q, want %q", got, c.want)
			}
		})
	}
}

// A transaction's partition reads and claims, sent again and again, are
// planned once (PostgreSQL's custom plans, made afresh at each call, cost
// more than the statements did), and no statement of the store gives a
// LIMIT as a parameter, which a generic plan misjudges (it expects a
// tenth of the rows): the limits are written in, or a bound of them.
// boundedLimit matches a LIMIT parameter applied to a pick whose own LIMIT
// is written in.
var boundedLimit = regexp.MustCompile(`LIMIT \d+ FOR UPDATE SKIP LOCKED\) bound LIMIT \$\d+`)

func TestClaimsAndReadsArePlannedOnce(t *testing.T) {
	reg, err := storetest.NewRegistry()
	if err != nil {
		t.Fatal(err)
	}
	s := open(t, pgstore.Options{Registry: reg})
	ctx := t.Context()
	for _, g := range []driver.GroupSpec{
		{ID: "devices", PartitionBy: []string{"device_id"}, Handled: []string{"device.registered"}},
		{ID: "jobs", Exclusive: true, Handled: []string{fixtures.TypeAssetRegistered}},
	} {
		if err := s.RegisterGroup(ctx, g); err != nil {
			t.Fatal(err)
		}
	}
	const rounds = 8
	for i := range rounds {
		if _, err := s.Append(ctx, core.Messages(fixtures.DeviceRegistered{DeviceID: fmt.Sprint("d", i)}, fixtures.AssetRegistered{AssetID: fmt.Sprint("a", i)}), driver.AppendOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	type plans struct {
		sql             string
		generic, custom int64
	}
	var got []plans
	err = s.Update(ctx, func(tx driver.Tx) error {
		claimer := tx.(driver.ClaimManyTx)
		for i := range rounds {
			if _, err := tx.ReadPartition(map[string]string{"device_id": fmt.Sprint("d", i)}, []string{"device.registered"}, driver.ReadOptions{}); err != nil {
				return err
			}
			for _, group := range []string{"devices", "jobs"} {
				if _, err := claimer.ClaimMany(group, "w", 10, 1); err != nil {
					return err
				}
			}
		}
		conn, err := pgstore.Conn(tx)
		if err != nil {
			return err
		}
		rows, err := conn.Query(ctx, `SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements`)
		if err != nil {
			return err
		}
		for rows.Next() {
			var p plans
			if err := rows.Scan(&p.sql, &p.generic, &p.custom); err != nil {
				return err
			}
			got = append(got, p)
		}
		return rows.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, p := range got {
		// A claim's limit is a parameter only above a bound written in
		// (claimBound): its plan is made for the bound.
		if strings.Contains(boundedLimit.ReplaceAllString(p.sql, ""), "LIMIT $") {
			t.Errorf("a statement takes its LIMIT as a parameter:\n%s", p.sql)
		}
		for _, what := range []string{"claimed_by", s.Prefix() + "_message_keys"} {
			if !strings.Contains(p.sql, what) || strings.HasPrefix(p.sql, "SELECT "+s.Prefix()+"_lock") {
				continue
			}
			if p.generic+p.custom >= rounds {
				seen[what] = true
				if p.custom > 0 {
					t.Errorf("%d of %d calls were planned afresh:\n%s", p.custom, p.generic+p.custom, p.sql)
				}
			}
		}
	}
	if len(seen) != 2 {
		t.Fatalf("the claims and reads were not among the session's prepared statements (found %v of claimed_by, the key pairs' table)", seen)
	}
}
