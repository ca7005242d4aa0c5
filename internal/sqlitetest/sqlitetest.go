// Package sqlitetest makes the SQLite stores of the root module's tests
// cheaper to create: Installer copies an empty store installed once
// instead of installing each one. Under the race detector an Install (the
// schema's tables, indexes and statistics written by SQLite compiled from
// C to Go, every memory access instrumented) costs about three times an
// Open; the property tests and the conformance suite create hundreds.
package sqlitetest

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/sourced-go/sourced/shell/sqlitestore"
)

// Installer returns a function with the signature of sqlitestore.Install
// that creates the store at path by copying an empty store, installed once
// per table prefix in t's temporary directory, and opening the copy with
// opts. The copy is the file Install would have made; what a test asserts
// of the store is unchanged, only the schema's creation is shared. The
// function may be called from several goroutines.
func Installer(t testing.TB) func(ctx context.Context, path string, opts sqlitestore.Options) (*sqlitestore.Store, error) {
	dir := t.TempDir()
	var mu sync.Mutex
	templates := map[string]string{} // prefix -> installed empty store
	return func(ctx context.Context, path string, opts sqlitestore.Options) (*sqlitestore.Store, error) {
		mu.Lock()
		tmpl, ok := templates[opts.Prefix]
		if !ok {
			tmpl = filepath.Join(dir, fmt.Sprintf("template-%d.db", len(templates)))
			s, err := sqlitestore.Install(ctx, tmpl, sqlitestore.Options{Registry: opts.Registry, RawPayloads: opts.RawPayloads, Prefix: opts.Prefix, Logger: opts.Logger})
			if err == nil {
				err = s.Close()
			}
			if err != nil {
				mu.Unlock()
				return nil, fmt.Errorf("sqlitetest: install the template: %w", err)
			}
			templates[opts.Prefix] = tmpl
		}
		mu.Unlock()
		// A closed store's file holds everything (its last close
		// checkpointed the write-ahead log); copy a leftover log too.
		for _, suffix := range []string{"", "-wal"} {
			if err := copyFile(tmpl+suffix, path+suffix); err != nil && !(suffix != "" && os.IsNotExist(err)) {
				return nil, fmt.Errorf("sqlitetest: copy the template: %w", err)
			}
		}
		return sqlitestore.Open(ctx, path, opts)
	}
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
