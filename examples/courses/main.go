// Command courses runs the course and enrolment example of the manual
// (package domain: the messages, deciders, projector and reactors, and the
// scenario) end to end on a SQLite file, with the background runtime. It
// prints what happens and exits 0 once everything has settled, the
// scheduled reminder included. The read model, each course's roster, is a
// table of the same SQLite file, written in the transaction of the batch.
//
//	go run ./examples/courses [-db path/to/file.db]
//
// The same example on PostgreSQL is shell/pgstore/examples/courses.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"zombiezen.com/go/sqlite"
	"zombiezen.com/go/sqlite/sqlitex"

	"github.com/sourced-go/sourced/examples/courses/domain"
	"github.com/sourced-go/sourced/shell/sourced"
	"github.com/sourced-go/sourced/shell/sqlitestore"
)

func main() {
	db := flag.String("db", "", "SQLite file to use (default: a new file in a temporary directory)")
	flag.Parse()
	if err := run(context.Background(), *db, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "courses:", err)
		os.Exit(1)
	}
}

// run runs the example on the SQLite file at path (a temporary one when
// empty) and prints to out.
func run(ctx context.Context, path string, out io.Writer) error {
	if path == "" {
		dir, err := os.MkdirTemp("", "sourced-courses")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		path = filepath.Join(dir, "courses.db")
	}
	reg, err := domain.Registry()
	if err != nil {
		return err
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	store, err := sqlitestore.Install(ctx, path, sqlitestore.Options{Registry: reg, Logger: logger})
	if err != nil {
		return err
	}
	defer store.Close()
	if err := store.Update(ctx, func(tx sourced.Tx) error {
		conn, err := sqlitestore.Conn(tx)
		if err != nil {
			return err
		}
		return sqlitex.ExecuteTransient(conn,
			`CREATE TABLE IF NOT EXISTS course_rosters (course_id TEXT PRIMARY KEY, roster TEXT NOT NULL)`, nil)
	}); err != nil {
		return err
	}
	return domain.Run(ctx, store, rosters{store}, path, out)
}

// rosters is the read model in the course_rosters table of the store's
// SQLite file.
type rosters struct{ store *sqlitestore.Store }

// Save writes a roster, as JSON, in the batch's transaction.
func (rosters) Save(ctx context.Context, tx sourced.SyncTx, r domain.Roster) error {
	doc, err := json.Marshal(r)
	if err != nil {
		return err
	}
	conn, err := sqlitestore.Conn(tx)
	if err != nil {
		return err
	}
	return sqlitex.Execute(conn, `INSERT INTO course_rosters (course_id, roster) VALUES (?, ?)
		ON CONFLICT (course_id) DO UPDATE SET roster = excluded.roster`,
		&sqlitex.ExecOptions{Args: []any{r.CourseID, string(doc)}})
}

// Rosters reads the read model the projector wrote.
func (rm rosters) Rosters(ctx context.Context) ([]domain.Roster, error) {
	var out []domain.Roster
	err := rm.store.Update(ctx, func(tx sourced.Tx) error {
		conn, err := sqlitestore.Conn(tx)
		if err != nil {
			return err
		}
		return sqlitex.Execute(conn, `SELECT roster FROM course_rosters ORDER BY course_id`, &sqlitex.ExecOptions{
			ResultFunc: func(stmt *sqlite.Stmt) error {
				var r domain.Roster
				if err := json.Unmarshal([]byte(stmt.ColumnText(0)), &r); err != nil {
					return err
				}
				out = append(out, r)
				return nil
			},
		})
	})
	return out, err
}
