package pgstore_test

import (
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/internal/fixtures"
	"github.com/sourced-go/sourced/shell/driver"
	"github.com/sourced-go/sourced/shell/memstore"
	"github.com/sourced-go/sourced/shell/pgstore"
	"github.com/sourced-go/sourced/shell/storetest"
)

// Conn reaches the transaction's connection from Update's driver.Tx and
// its core.SyncTx, refuses another store's with ErrNotPostgres, and View
// reads the application's tables while an append holds the store's lock.
func TestConnAndView(t *testing.T) {
	reg, err := storetest.NewRegistry()
	if err != nil {
		t.Fatal(err)
	}
	s := open(t, pgstore.Options{Registry: reg})
	ctx := t.Context()
	table := s.Prefix() + "_read_model"
	err = s.Update(ctx, func(tx driver.Tx) error {
		for i, v := range []core.SyncTx{tx, tx.Context()} {
			conn, err := pgstore.Conn(v)
			if err != nil {
				return err
			}
			sql := "CREATE TABLE IF NOT EXISTS " + table + " (name text)"
			if i == 1 {
				sql = "INSERT INTO " + table + " VALUES ('committed')"
			}
			if _, err := conn.Exec(ctx, sql); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Pool().Exec(t.Context(), "DROP TABLE IF EXISTS "+table) })

	var kept core.SyncTx
	s.Update(ctx, func(tx driver.Tx) error { kept = tx.Context(); return nil })
	if _, err := pgstore.Conn(kept); err == nil {
		t.Fatal("Conn of a transaction whose Update returned gave its connection")
	}
	mem := memstore.New(reg)
	mem.Update(ctx, func(tx driver.Tx) error {
		for _, v := range []core.SyncTx{tx, tx.Context(), nil} {
			if _, err := pgstore.Conn(v); !errors.Is(err, pgstore.ErrNotPostgres) {
				t.Errorf("Conn(%T) = %v, want ErrNotPostgres", v, err)
			}
		}
		return nil
	})

	holding, release := make(chan struct{}), make(chan struct{})
	writeDone := make(chan error, 1)
	go func() {
		writeDone <- s.Update(ctx, func(tx driver.Tx) error {
			if _, err := tx.Append([]core.Message{core.NewMessage(fixtures.CourseCreated{CourseName: "x"})}, driver.AppendOptions{}); err != nil {
				return err
			}
			close(holding)
			<-release // the append's exclusive lock stays held
			return nil
		})
	}()
	<-holding
	viewDone := make(chan error, 1)
	var n int
	go func() {
		viewDone <- s.View(ctx, func(tx pgx.Tx) error {
			return tx.QueryRow(ctx, "SELECT count(*) FROM "+table).Scan(&n)
		})
	}()
	select {
	case err := <-viewDone:
		if err != nil || n != 1 {
			t.Errorf("View during an append: %d rows (%v), want 1", n, err)
		}
	case <-time.After(10 * time.Second):
		t.Error("View waited for the append's lock")
	}
	close(release)
	if err := <-writeDone; err != nil {
		t.Fatal(err)
	}
	err = s.View(ctx, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, "INSERT INTO "+table+" VALUES ('x')")
		return err
	})
	if err == nil {
		t.Fatal("a View wrote")
	}
}
