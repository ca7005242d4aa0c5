// Package pgcli is the PostgreSQL driver of the sourced operator tool
// (package github.com/sourced-go/sourced/cmd/sourced/cli): with it the
// tool's commands run on a pgstore database given as -db postgres://....
// It lives in the pgstore module so that pgx never enters the root
// module's build; shell/pgstore/cmd/sourced is the binary with both
// drivers:
//
//	go install github.com/sourced-go/sourced/shell/pgstore/cmd/sourced@latest
//	sourced -db postgres://app@db.internal/app stats
//
// An application building its own tool does the same:
//
//	func main() { cli.Main(cli.SQLite(), pgcli.Driver()) }
package pgcli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/sourced-go/sourced/cmd/sourced/cli"
	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/shell"
	"github.com/sourced-go/sourced/shell/pgstore"
)

// Driver returns the driver of PostgreSQL URLs (postgres:// and
// postgresql://).
func Driver() cli.Driver { return driver{} }

type driver struct{}

var quiet = slog.New(slog.DiscardHandler)

func (driver) Name() string          { return "PostgreSQL" }
func (driver) SchemaVersion() int    { return pgstore.SchemaVersion }
func (driver) DefaultPrefix() string { return pgstore.DefaultPrefix }

func (driver) Accepts(db string) bool {
	return strings.HasPrefix(db, "postgres://") || strings.HasPrefix(db, "postgresql://")
}

func (d driver) Open(ctx context.Context, db, prefix string) (cli.Store, error) {
	return d.OpenRegistry(ctx, db, prefix, nil)
}

// OpenRegistry is Open knowing the application's types
// (cli.RegistryOpener).
func (driver) OpenRegistry(ctx context.Context, db, prefix string, reg *codec.Registry) (cli.Store, error) {
	s, err := pgstore.Open(ctx, db, pgstore.Options{Prefix: prefix, RawPayloads: true, Registry: reg, Logger: quiet, MaxConns: 4})
	if errors.Is(err, shell.ErrNotInstalled) {
		return nil, fmt.Errorf("the database has no Sourced store with prefix %q: run 'sourced -db URL -prefix %s migrate', or apply 'sourced migrate print -store postgres' with your migrations (%w)", prefix, prefix, err)
	}
	if err != nil {
		return nil, err
	}
	return store{s}, nil
}

func (driver) Install(ctx context.Context, db, prefix string) error {
	s, err := pgstore.Install(ctx, db, pgstore.Options{Prefix: prefix, RawPayloads: true, Logger: quiet, MaxConns: 2})
	if err != nil {
		return err
	}
	return s.Close()
}

func (driver) Migrations(prefix string) ([]cli.Migration, error) {
	ms, err := pgstore.Migrations(prefix)
	if err != nil {
		return nil, err
	}
	out := make([]cli.Migration, len(ms))
	for i, m := range ms {
		out[i] = cli.Migration{Version: m.Version, SQL: m.SQL}
	}
	return out, nil
}

func (driver) Applied(ctx context.Context, db, prefix string) ([]cli.AppliedMigration, error) {
	ms, err := pgstore.AppliedMigrations(ctx, db, prefix)
	if err != nil {
		return nil, err
	}
	out := make([]cli.AppliedMigration, len(ms))
	for i, m := range ms {
		out[i] = cli.AppliedMigration{Version: m.Version, AppliedAt: m.AppliedAt}
	}
	return out, nil
}

// store adapts *pgstore.Store to cli.Store.
type store struct{ *pgstore.Store }

func (s store) Workers(ctx context.Context) ([]cli.Worker, error) {
	ws, err := s.Store.Workers(ctx)
	out := make([]cli.Worker, len(ws))
	for i, w := range ws {
		out[i] = cli.Worker{ID: w.ID, LastSeen: w.LastSeen}
	}
	return out, err
}
