package sqlitestore_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sourced-go/sourced/shell/driver"

	"zombiezen.com/go/sqlite"
	"zombiezen.com/go/sqlite/sqlitex"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell/memstore"
	"github.com/sourced-go/sourced/shell/sqlitestore"
)

// Conn reaches the transaction's connection from the driver.Tx of Update
// and from its core.SyncTx (what a Sync effect receives), and refuses what is
// not the SQLite store's with ErrNotSQLite instead of panicking.
func TestConn(t *testing.T) {
	s := install(t, dbPath(t), sqlitestore.Options{})
	ctx := t.Context()
	err := s.Update(ctx, func(tx driver.Tx) error {
		for _, v := range []core.SyncTx{tx, tx.Context()} {
			conn, err := sqlitestore.Conn(v)
			if err != nil {
				return err
			}
			if err := sqlitex.ExecuteTransient(conn, "CREATE TABLE IF NOT EXISTS read_model (name TEXT)", nil); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	var kept core.SyncTx
	s.Update(ctx, func(tx driver.Tx) error { kept = tx.Context(); return nil })
	if _, err := sqlitestore.Conn(kept); err == nil {
		t.Fatal("Conn of a transaction whose Update returned gave its connection")
	}

	mem := memstore.New(registry(t))
	err = mem.Update(ctx, func(tx driver.Tx) error {
		for _, v := range []core.SyncTx{tx, tx.Context(), nil, "not a tx"} {
			_, err := sqlitestore.Conn(v)
			if !errors.Is(err, sqlitestore.ErrNotSQLite) || !strings.Contains(err.Error(), "needs the SQLite store") && v != nil {
				t.Errorf("Conn(%T) = %v, want ErrNotSQLite saying what to do", v, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// View reads the application's tables on the reader pool: it runs while
// a writer holds the write lock (and sees the last commit, not the
// writer's pending work), and it cannot write.
func TestViewDuringWrite(t *testing.T) {
	s := install(t, dbPath(t), sqlitestore.Options{})
	ctx := t.Context()
	err := s.Update(ctx, func(tx driver.Tx) error {
		conn, err := sqlitestore.Conn(tx)
		if err != nil {
			return err
		}
		return sqlitex.ExecuteScript(conn, "CREATE TABLE read_model (name TEXT); INSERT INTO read_model VALUES ('committed');", nil)
	})
	if err != nil {
		t.Fatal(err)
	}
	count := func(conn *sqlite.Conn) (n int, err error) {
		err = sqlitex.ExecuteTransient(conn, "SELECT count(*) FROM read_model", &sqlitex.ExecOptions{
			ResultFunc: func(stmt *sqlite.Stmt) error { n = stmt.ColumnInt(0); return nil },
		})
		return n, err
	}

	holding, release := make(chan struct{}), make(chan struct{})
	writeDone := make(chan error, 1)
	go func() {
		writeDone <- s.Update(ctx, func(tx driver.Tx) error {
			conn, err := sqlitestore.Conn(tx)
			if err != nil {
				return err
			}
			if err := sqlitex.ExecuteTransient(conn, "INSERT INTO read_model VALUES ('pending')", nil); err != nil {
				return err
			}
			close(holding)
			<-release // the write lock stays held until the View is done
			return nil
		})
	}()
	select {
	case <-holding:
	case err := <-writeDone:
		t.Fatalf("writer ended early: %v", err)
	}
	viewDone := make(chan error, 1)
	var seen int
	go func() {
		viewDone <- s.View(ctx, func(conn *sqlite.Conn) error {
			var err error
			seen, err = count(conn)
			return err
		})
	}()
	select {
	case err := <-viewDone:
		if err != nil || seen != 1 {
			t.Errorf("View during a write: %d rows (%v), want the 1 committed", seen, err)
		}
	case <-time.After(10 * time.Second):
		t.Error("View waited for the writer's lock")
	}
	close(release)
	if err := <-writeDone; err != nil {
		t.Fatal(err)
	}
	select {
	case <-viewDone:
	default:
	}

	err = s.View(ctx, func(conn *sqlite.Conn) error {
		seen, err = count(conn)
		return err
	})
	if err != nil || seen != 2 {
		t.Fatalf("View after the commit: %d rows (%v), want 2", seen, err)
	}
	err = s.View(ctx, func(conn *sqlite.Conn) error {
		return sqlitex.ExecuteTransient(conn, "INSERT INTO read_model VALUES ('x')", nil)
	})
	if err == nil {
		t.Fatal("a View wrote")
	}
	mine := errors.New("mine")
	if err := s.View(ctx, func(*sqlite.Conn) error { return mine }); !errors.Is(err, mine) {
		t.Fatalf("View returned %v, want fn's error", err)
	}
}
