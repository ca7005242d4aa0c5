package pgstore_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/internal/fixtures"
	"github.com/sourced-go/sourced/shell/driver"
	"github.com/sourced-go/sourced/shell/pgstore"
	"github.com/sourced-go/sourced/shell/pgstore/internal/pgtest"
	"github.com/sourced-go/sourced/shell/storetest"
)

// TestOpenChecksVersion: Open refuses a database without the store's
// tables, with a schema newer than the program, or with one lacking
// migrations.
func TestOpenChecksVersion(t *testing.T) {
	reg, err := storetest.NewRegistry()
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	url := pgtest.URL(t)
	prefix := pgtest.Prefix()
	if _, err := pgstore.Open(ctx, url, pgstore.Options{Registry: reg, Prefix: prefix}); !errors.Is(err, driver.ErrNotInstalled) {
		t.Fatalf("open of an empty prefix: %v, want ErrNotInstalled", err)
	}
	s := open(t, pgstore.Options{Registry: reg, Prefix: prefix})
	mig := prefix + "_schema_migrations"
	exec := func(sql string) {
		t.Helper()
		if _, err := s.Pool().Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	exec(fmt.Sprintf(`INSERT INTO %s (version, applied_at) VALUES (%d, now())`, mig, pgstore.SchemaVersion+1))
	if _, err := pgstore.Open(ctx, url, pgstore.Options{Registry: reg, Prefix: prefix}); !errors.Is(err, pgstore.ErrSchemaNewer) {
		t.Fatalf("open of a newer schema: %v, want ErrSchemaNewer", err)
	}
	exec(fmt.Sprintf(`DELETE FROM %s WHERE version >= %d`, mig, pgstore.SchemaVersion))
	if pgstore.SchemaVersion > 1 {
		if _, err := pgstore.Open(ctx, url, pgstore.Options{Registry: reg, Prefix: prefix}); !errors.Is(err, pgstore.ErrSchemaOutdated) {
			t.Fatalf("open of an outdated schema: %v, want ErrSchemaOutdated", err)
		}
	} else if _, err := pgstore.Open(ctx, url, pgstore.Options{Registry: reg, Prefix: prefix}); !errors.Is(err, driver.ErrNotInstalled) {
		t.Fatalf("open with no migration recorded: %v, want ErrNotInstalled", err)
	}
	// Install brings it back (the scripts are idempotent).
	if err := s.Install(ctx); err != nil {
		t.Fatal(err)
	}
	o, err := pgstore.Open(ctx, url, pgstore.Options{Registry: reg, Prefix: prefix})
	if err != nil {
		t.Fatalf("open after install: %v", err)
	}
	o.Close()
}

// TestInstallConcurrently installs one prefix from several stores at once.
func TestInstallConcurrently(t *testing.T) {
	reg, err := storetest.NewRegistry()
	if err != nil {
		t.Fatal(err)
	}
	prefix := pgtest.Prefix()
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := pgstore.Install(t.Context(), pgtest.URL(t), pgstore.Options{Registry: reg, Prefix: prefix, MaxConns: 2})
			if err != nil {
				t.Error(err)
				return
			}
			s.Close()
		}()
	}
	wg.Wait()
	open(t, pgstore.Options{Registry: reg, Prefix: prefix}) // and drops it at the end
}

// TestBadOptions: a prefix that is not an identifier and a missing
// registry are refused before connecting.
func TestBadOptions(t *testing.T) {
	reg, _ := storetest.NewRegistry()
	for _, p := range []string{"1abc", "a-b", "a;drop", "x y"} {
		if _, err := pgstore.Open(t.Context(), "postgres://nowhere.invalid/x", pgstore.Options{Registry: reg, Prefix: p}); err == nil {
			t.Errorf("prefix %q accepted", p)
		}
	}
	if _, err := pgstore.Open(t.Context(), "postgres://nowhere.invalid/x", pgstore.Options{}); err == nil {
		t.Error("no registry accepted")
	}
}

// TestUninstallLeavesNothing: Uninstall drops every object the
// migrations created under the prefix (tables, sequences, functions),
// also while the store's readers and appenders are busy: a deadlock
// with one of them is retried, not returned.
func TestUninstallLeavesNothing(t *testing.T) {
	reg, err := storetest.NewRegistry()
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	prefix := pgtest.Prefix()
	s, err := pgstore.Install(ctx, pgtest.URL(t), pgstore.Options{Registry: reg, Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	count := func() (n int) {
		t.Helper()
		err := s.Pool().QueryRow(ctx, `SELECT (SELECT count(*) FROM pg_class WHERE relname LIKE $1 || '\_%')
			+ (SELECT count(*) FROM pg_proc WHERE proname LIKE $1 || '\_%')`, prefix).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := count(); n == 0 {
		t.Fatal("install created no object under the prefix")
	}
	// Readers and appenders busy on other connections while it drops.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				msgs := core.Messages(fixtures.DeviceRegistered{DeviceID: fmt.Sprintf("d%d-%d", w, i), Name: "a"})
				if _, err := s.Append(ctx, msgs, driver.AppendOptions{}); err != nil {
					return // the tables are gone
				}
				s.ReadAll(ctx, driver.ReadAllOptions{Limit: 10})
			}
		}()
	}
	time.Sleep(50 * time.Millisecond)
	err = s.Uninstall(ctx)
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatalf("uninstall: %v", err)
	}
	if n := count(); n != 0 {
		rows, _ := s.Pool().Query(ctx, `SELECT relname FROM pg_class WHERE relname LIKE $1 || '\_%' UNION ALL SELECT proname FROM pg_proc WHERE proname LIKE $1 || '\_%'`, prefix)
		names, _ := pgx.CollectRows(rows, pgx.RowTo[string])
		t.Fatalf("uninstall left %d objects under the prefix: %v", n, names)
	}
}

// TestPartitionKeysReencoded: schema version 11 writes the partition keys
// that versions before encoded with encoding/json (which escapes <, >, &,
// control characters and U+2028 its own way) as core.Partition's Key, so
// that the store finds those offsets and snapshots again instead of
// starting a second offset for the same partition.
func TestPartitionKeysReencoded(t *testing.T) {
	reg, err := storetest.NewRegistry()
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	prefix := pgtest.Prefix()
	s := open(t, pgstore.Options{Registry: reg, Prefix: prefix})
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := s.Pool().Exec(ctx, sql, args...); err != nil {
			t.Fatal(err)
		}
	}
	device := "<a&b>\u2028\t\"q\"\\"
	partition := core.Partition{"device_id": device}
	old, err := json.Marshal([][2]string{{"device_id", device}})
	if err != nil {
		t.Fatal(err)
	}
	if string(old) == partition.Key() {
		t.Fatal("the test's partition encodes alike both ways: it tests nothing")
	}
	if err := s.RegisterGroup(ctx, driver.GroupSpec{ID: "devices", PartitionBy: []string{"device_id"}, Handled: []string{fixtures.TypeDeviceRegistered}}); err != nil {
		t.Fatal(err)
	}
	add := func() {
		t.Helper()
		if _, err := s.Append(ctx, core.Messages(fixtures.DeviceRegistered{DeviceID: device, Name: "n"}), driver.AppendOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	add()
	if err := s.SaveSnapshot(ctx, driver.Snapshot{Group: "devices", Partition: partition.Key(), Version: "v1", Position: 1, State: []byte(`1`)}); err != nil {
		t.Fatal(err)
	}
	// The database as version 10 left it.
	exec(fmt.Sprintf(`UPDATE %s_offsets SET partition_key = $1`, prefix), string(old))
	exec(fmt.Sprintf(`UPDATE %s_snapshots SET partition_key = $1`, prefix), string(old))
	exec(fmt.Sprintf(`DELETE FROM %s_schema_migrations WHERE version >= 11`, prefix))
	if err := s.Install(ctx); err != nil {
		t.Fatal(err)
	}
	var keys []string
	rows, err := s.Pool().Query(ctx, fmt.Sprintf(`SELECT partition_key FROM %s_offsets UNION ALL SELECT partition_key FROM %s_snapshots`, prefix, prefix))
	if err != nil {
		t.Fatal(err)
	}
	keys, err = pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 2 || keys[0] != partition.Key() || keys[1] != partition.Key() {
		t.Fatalf("keys after the migration %q, want the offset's and the snapshot's %q", keys, partition.Key())
	}
	add() // the same partition: its offset, not a second one
	c, err := s.ClaimNext(ctx, "devices", "w", 10)
	if err != nil || c == nil {
		t.Fatalf("claim: %v, %v", c, err)
	}
	if !core.Partition(c.Partition).Equal(partition) || len(c.Messages) != 2 {
		t.Fatalf("claimed %q with %d messages, want %q with both", c.Partition, len(c.Messages), partition)
	}
	if snap, found, err := s.LoadSnapshot(ctx, "devices", partition.Key(), "v1"); err != nil || !found || snap.Position != 1 {
		t.Fatalf("snapshot after the migration: %+v, %v, %v", snap, found, err)
	}
}
