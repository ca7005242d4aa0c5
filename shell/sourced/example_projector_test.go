package sourced_test

import (
	"context"
	"fmt"
	"strings"

	"zombiezen.com/go/sqlite"
	"zombiezen.com/go/sqlite/sqlitex"

	"github.com/sourced-go/sourced/shell/sourced"
	"github.com/sourced-go/sourced/shell/sqlitestore"
)

// A projector keeps a read model in the application's own table, written
// by Sync in the transaction that acknowledges the events: it never misses
// an event nor sees one twice.
func ExampleProjector() {
	ctx := context.Background()
	store := openStore(ctx)
	defer store.Close()
	_ = store.Update(ctx, func(tx sourced.Tx) error {
		conn, err := sqlitestore.Conn(tx)
		if err != nil {
			return err
		}
		return sqlitex.ExecuteTransient(conn, `CREATE TABLE rosters (course_id TEXT PRIMARY KEY, students TEXT)`, nil)
	})

	rosters := sourced.Projector[[]string]{Group: "courses.rosters", PartitionBy: []string{"course_id"}}.With(
		sourced.Evolve(func(s []string, e StudentEnrolled) []string { return append(s, e.StudentID) }),
		sourced.Sync(func(ctx context.Context, tx sourced.SyncTx, b sourced.Batch[[]string]) error {
			conn, err := sqlitestore.Conn(tx) // the batch's transaction
			if err != nil {
				return err
			}
			return sqlitex.Execute(conn, `INSERT INTO rosters VALUES (?, ?)
				ON CONFLICT (course_id) DO UPDATE SET students = excluded.students`,
				&sqlitex.ExecOptions{Args: []any{b.Partition["course_id"], strings.Join(b.State, ",")}})
		}),
	)
	rt, err := sourced.NewRuntime(store, sourced.DefaultConfig(), enrolments, welcomes, rosters)
	if err == nil {
		err = rt.Start(ctx)
	}
	if err != nil {
		fmt.Println(err)
		return
	}
	defer rt.Stop(ctx)
	for _, s := range []string{"ada", "bob"} {
		_, _ = sourced.Handle(ctx, store, enrolments, EnrolStudent{CourseID: "c1", StudentID: s})
	}
	if err := rt.WaitIdle(ctx, 0); err != nil { // for tests and examples: until everything settled
		fmt.Println(err)
	}

	_ = store.View(ctx, func(conn *sqlite.Conn) error { // the reader pool: never the write lock
		return sqlitex.Execute(conn, `SELECT course_id, students FROM rosters`, &sqlitex.ExecOptions{
			ResultFunc: func(stmt *sqlite.Stmt) error {
				fmt.Println(stmt.ColumnText(0), stmt.ColumnText(1))
				return nil
			},
		})
	})
	// Output:
	// c1 ada,bob
}
