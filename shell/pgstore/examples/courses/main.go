// Command courses runs the course and enrolment example of the manual
// (package examples/courses/domain, the very scenario of
// examples/courses) end to end on PostgreSQL, with the background
// runtime: the store is a pgstore installed under a table prefix, and the
// read model, each course's roster, a table <prefix>_course_rosters of
// the same database written in the transaction of the batch. It prints
// what happens and exits 0 once everything has settled.
//
//	cd shell/pgstore && go run ./examples/courses -db 'postgres://user@host/db' [-prefix courses]
//
// Run it twice and the second run finds the first one's courses (names
// are unique for ever): -fresh drops the prefix's tables first.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/examples/courses/domain"
	"github.com/sourced-go/sourced/shell/pgstore"
)

func main() {
	db := flag.String("db", os.Getenv("DATABASE_URL"), "PostgreSQL URL (default: $DATABASE_URL)")
	prefix := flag.String("prefix", "courses", "table prefix of the store and its read model")
	fresh := flag.Bool("fresh", false, "drop the prefix's tables first")
	flag.Parse()
	if *db == "" {
		fmt.Fprintln(os.Stderr, "courses: give the database: -db postgres://user@host/db (or set DATABASE_URL)")
		os.Exit(2)
	}
	if err := run(context.Background(), *db, *prefix, *fresh, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "courses:", err)
		os.Exit(1)
	}
}

// run runs the example on the PostgreSQL database at url, under prefix,
// and prints to out; fresh drops the prefix's tables first.
func run(ctx context.Context, url, prefix string, fresh bool, out io.Writer) error {
	reg, err := domain.Registry()
	if err != nil {
		return err
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	store, err := pgstore.Install(ctx, url, pgstore.Options{Registry: reg, Prefix: prefix, Logger: logger})
	if err != nil {
		return err
	}
	defer store.Close()
	rm := rosters{store: store, table: store.Prefix() + "_course_rosters"}
	if fresh {
		if err := store.Uninstall(ctx); err != nil {
			return err
		}
		if _, err := store.Pool().Exec(ctx, "DROP TABLE IF EXISTS "+rm.table); err != nil {
			return err
		}
		if err := store.Install(ctx); err != nil {
			return err
		}
	}
	if _, err := store.Pool().Exec(ctx, "CREATE TABLE IF NOT EXISTS "+rm.table+" (course_id text PRIMARY KEY, roster json NOT NULL)"); err != nil {
		return err
	}
	// A listener, so that workers of other processes on this database
	// wake on this one's appends and this one's on theirs.
	l, err := store.Listen(ctx)
	if err != nil {
		return err
	}
	defer l.Close()
	return domain.Run(ctx, store, rm, "PostgreSQL, tables "+store.Prefix()+"_*", out)
}

// rosters is the read model in a table of the store's database.
type rosters struct {
	store *pgstore.Store
	table string
}

// Save writes a roster, as JSON, in the batch's transaction.
func (rm rosters) Save(ctx context.Context, tx core.SyncTx, r domain.Roster) error {
	doc, err := json.Marshal(r)
	if err != nil {
		return err
	}
	conn, err := pgstore.Conn(tx)
	if err != nil {
		return err
	}
	_, err = conn.Exec(ctx, "INSERT INTO "+rm.table+` (course_id, roster) VALUES ($1, $2)
		ON CONFLICT (course_id) DO UPDATE SET roster = excluded.roster`, r.CourseID, string(doc))
	return err
}

// Rosters reads the read model the projector wrote.
func (rm rosters) Rosters(ctx context.Context) ([]domain.Roster, error) {
	rows, err := rm.store.Pool().Query(ctx, "SELECT roster::text FROM "+rm.table+" ORDER BY course_id")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []domain.Roster
	for rows.Next() {
		var doc string
		if err := rows.Scan(&doc); err != nil {
			return nil, err
		}
		var r domain.Roster
		if err := json.Unmarshal([]byte(doc), &r); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}
