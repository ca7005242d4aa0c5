package sqlitestore_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"zombiezen.com/go/sqlite"
	"zombiezen.com/go/sqlite/sqlitex"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell"
	"github.com/sourced-go/sourced/shell/memstore"
	"github.com/sourced-go/sourced/shell/sqlitestore"
)

// Sync work writes the application's own table in the transaction of the
// append (Conn), and a read model is read on the reader pool, without the
// write lock (View). On another store Conn says so instead of panicking.
func ExampleConn() {
	ctx := context.Background()
	reg := codec.NewRegistry()
	codec.MustRegister[CourseCreated](reg, "courses.created")
	s, err := sqlitestore.Install(ctx, ":memory:", sqlitestore.Options{Registry: reg})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()

	err = s.Update(ctx, func(tx shell.Tx) error {
		conn, err := sqlitestore.Conn(tx)
		if err != nil {
			return err
		}
		if err := sqlitex.ExecuteTransient(conn, "CREATE TABLE course_names (id TEXT PRIMARY KEY, name TEXT)", nil); err != nil {
			return err
		}
		if _, err := tx.Append(core.Messages(CourseCreated{CourseID: "c1", CourseName: "Algebra"}), shell.AppendOptions{}); err != nil {
			return err
		}
		return sqlitex.Execute(conn, "INSERT INTO course_names VALUES (?, ?)", &sqlitex.ExecOptions{Args: []any{"c1", "Algebra"}})
	})
	if err != nil {
		log.Fatal(err)
	}

	err = s.View(ctx, func(conn *sqlite.Conn) error {
		return sqlitex.Execute(conn, "SELECT name FROM course_names WHERE id = ?", &sqlitex.ExecOptions{
			Args:       []any{"c1"},
			ResultFunc: func(stmt *sqlite.Stmt) error { fmt.Println("read model:", stmt.ColumnText(0)); return nil },
		})
	})
	if err != nil {
		log.Fatal(err)
	}

	mem := memstore.New(reg)
	mem.Update(ctx, func(tx shell.Tx) error {
		_, err := sqlitestore.Conn(tx)
		fmt.Println("on memstore:", errors.Is(err, sqlitestore.ErrNotSQLite))
		return nil
	})
	// Output:
	// read model: Algebra
	// on memstore: true
}
