package pgstore_test

import (
	"context"
	"log"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/shell/pgstore"
	"github.com/sourced-go/sourced/shell/sqlitestore"
)

// Installing the store, listening to other processes' appends, and
// copying a SQLite log into it (the move of README, "PostgreSQL").
func Example() {
	ctx := context.Background()
	reg := codec.NewRegistry() // the app's registry, its types registered
	pg, err := pgstore.Install(ctx, "postgres://app@db.internal/app", pgstore.Options{Registry: reg})
	if err != nil {
		log.Fatal(err)
	}
	defer pg.Close()
	// Workers of this process wake on appends made by any process.
	l, err := pg.Listen(ctx) // wake this process's workers on any process's appends (LISTEN/NOTIFY)
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()

	// Moving an app from SQLite: copy the log once, with the app stopped.
	lite, err := sqlitestore.Open(ctx, "app.db", sqlitestore.Options{Registry: reg})
	if err != nil {
		log.Fatal(err)
	}
	defer lite.Close()
	n, err := pgstore.Copy(ctx, lite, pg)
	if err != nil {
		log.Fatal(err)
	}
	log.Printf("copied %d messages", n)
}
