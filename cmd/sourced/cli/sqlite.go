package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/shell"
	"github.com/sourced-go/sourced/shell/sqlitestore"
)

// quiet drops the stores' diagnostics: the commands report what they did.
var quiet = slog.New(slog.DiscardHandler)

// SQLite returns the driver of SQLite files (package sqlitestore): every
// -db value that is not a URL of another database (a path, or a "file:"
// URI).
func SQLite() Driver { return sqliteDriver{} }

type sqliteDriver struct{}

func (sqliteDriver) Name() string          { return "SQLite" }
func (sqliteDriver) SchemaVersion() int    { return sqlitestore.SchemaVersion }
func (sqliteDriver) DefaultPrefix() string { return sqlitestore.DefaultPrefix }

func (sqliteDriver) Accepts(db string) bool {
	scheme, _, ok := strings.Cut(db, "://")
	return !ok || scheme == "file" || strings.ContainsAny(scheme, `/\.`)
}

func (d sqliteDriver) Open(ctx context.Context, db, prefix string) (Store, error) {
	return d.OpenRegistry(ctx, db, prefix, nil)
}

// OpenRegistry is Open knowing the application's types (RegistryOpener).
func (sqliteDriver) OpenRegistry(ctx context.Context, db, prefix string, reg *codec.Registry) (Store, error) {
	if _, err := os.Stat(db); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%s: no such file (create it with: sourced -db %s migrate)", db, db)
		}
		return nil, err
	}
	s, err := sqlitestore.Open(ctx, db, sqlitestore.Options{Prefix: prefix, RawPayloads: true, Registry: reg, Logger: quiet})
	if errors.Is(err, shell.ErrNotInstalled) {
		return nil, fmt.Errorf("%s is not installed (prefix %q): run 'sourced -db %s migrate', or apply the schema from 'sourced migrate print' with your migrations", db, prefix, db)
	}
	if err != nil {
		return nil, err
	}
	return sqliteStore{s}, nil
}

func (sqliteDriver) Install(ctx context.Context, db, prefix string) error {
	s, err := sqlitestore.Install(ctx, db, sqlitestore.Options{Prefix: prefix, RawPayloads: true, Logger: quiet})
	if err != nil {
		return err
	}
	return s.Close()
}

func (sqliteDriver) Migrations(prefix string) ([]Migration, error) {
	ms, err := sqlitestore.Migrations(prefix)
	if err != nil {
		return nil, err
	}
	out := make([]Migration, len(ms))
	for i, m := range ms {
		out[i] = Migration{m.Version, m.SQL}
	}
	return out, nil
}

func (sqliteDriver) Applied(ctx context.Context, db, prefix string) ([]AppliedMigration, error) {
	ms, err := sqlitestore.AppliedMigrations(ctx, db, prefix)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%s: no such file (create it with: sourced -db %s migrate)", db, db)
	}
	if err != nil {
		return nil, err
	}
	out := make([]AppliedMigration, len(ms))
	for i, m := range ms {
		out[i] = AppliedMigration{m.Version, m.AppliedAt}
	}
	return out, nil
}

// sqliteStore adapts *sqlitestore.Store to Store.
type sqliteStore struct{ *sqlitestore.Store }

var _ ReadOnlyReporter = sqliteStore{}

func (s sqliteStore) Workers(ctx context.Context) ([]Worker, error) {
	ws, err := s.Store.Workers(ctx)
	out := make([]Worker, len(ws))
	for i, w := range ws {
		out[i] = Worker{w.ID, w.LastSeen}
	}
	return out, err
}
