package pgstore_test

import (
	"context"
	"log"
	"sync"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell"
	"github.com/sourced-go/sourced/shell/driver"
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

// An application server appends from many goroutines at once. The store
// keeps ConcurrentAppends transactions of standalone appends in flight
// (one by default) and sends the appends made meanwhile together in the
// next, each still refused or written on its own. Raise it for a server
// of many cores far from the application; a negative value sends every
// append in a transaction of its own.
func ExampleOptions_concurrentAppends() {
	ctx := context.Background()
	reg := codec.NewRegistry() // the app's registry, "order.placed" registered
	pg, err := pgstore.Open(ctx, "postgres://app@db.internal/app", pgstore.Options{Registry: reg, ConcurrentAppends: 2})
	if err != nil {
		log.Fatal(err)
	}
	defer pg.Close()
	type placed struct {
		OrderID string `json:"order_id"`
	}
	var wg sync.WaitGroup
	for _, id := range []string{"o1", "o2", "o3"} { // requests served at once
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := pg.Append(ctx, []core.Message{core.NewMessage(placed{OrderID: id})}, shell.AppendOptions{}); err != nil {
				log.Print(err)
			}
		}()
	}
	wg.Wait()
}

// A shell.Runtime warms the store's sessions at its Start. An application
// server that only handles commands (shell.Handle, no runtime) warms its
// own at boot, before it takes requests: each new PostgreSQL session
// plans the store's statements at their first use, tens of milliseconds
// the first requests would otherwise wait.
func ExampleStore_Warm() {
	ctx := context.Background()
	reg := codec.NewRegistry() // the app's registry, its types registered
	pg, err := pgstore.Open(ctx, "postgres://app@db.internal/app", pgstore.Options{Registry: reg, MaxConns: 16})
	if err != nil {
		log.Fatal(err)
	}
	defer pg.Close()
	// The request handlers at work at once, each claiming nothing.
	if err := pg.Warm(ctx, driver.Warmup{Sessions: 16}); err != nil {
		log.Printf("warm-up: %v", err) // an optimisation: serve all the same
	}
}
