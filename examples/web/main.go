// Command web is the manual's example application as a Go web server: course
// creation with unique names and student enrolment with a capacity, decided
// synchronously in net/http handlers with sourced.Handle; the reactions (a
// welcome for every enrolled student) and a read model (each course's
// roster, projected into a table of the same SQLite file) run on workers in
// the same process.
//
//	go run ./examples/web -addr :8080 -db web.db
//	curl -X POST localhost:8080/courses -d '{"course_id":"c1","course_name":"Algebra"}'
//	curl -X POST localhost:8080/courses/c1/students -d '{"student_id":"ada"}'
//	curl localhost:8080/courses/c1
//
// An invalid command answers 400 with the failing fields, a rejected one
// 409 (or 404 for an unknown course), a busy store 503; nothing is stored
// in any of these cases. On SIGINT or SIGTERM the server stops accepting
// requests and finishes those in flight, the workers drain what they
// caused and stop, and the store closes last (see Shutdown).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"

	"github.com/sourced-go/sourced/shell/sourced"
)

func main() {
	addr := flag.String("addr", "localhost:8080", "address to listen on")
	db := flag.String("db", "web.db", "SQLite file of the store")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := serve(ctx, *addr, *db, nil); err != nil {
		fmt.Fprintln(os.Stderr, "web:", err)
		os.Exit(1)
	}
}

// serve runs the application on addr until ctx ends, then shuts it down
// gracefully. ready, if not nil, receives the listening address.
func serve(ctx context.Context, addr, path string, ready chan<- string) error {
	app, err := Open(ctx, path, sourced.DefaultConfig())
	if err != nil {
		return err
	}
	if err := app.Runtime.Start(ctx); err != nil {
		return errors.Join(err, app.Close())
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return errors.Join(err, Shutdown(context.WithoutCancel(ctx), nil, app))
	}
	srv := &http.Server{Handler: app.Routes(), BaseContext: func(net.Listener) context.Context { return context.WithoutCancel(ctx) }}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	slog.Info("web: listening", "addr", ln.Addr().String(), "db", path)
	if ready != nil {
		ready <- ln.Addr().String()
	}
	select {
	case <-ctx.Done():
	case err = <-served: // the server failed on its own
	}
	shutdown, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
	defer cancel()
	if serr := Shutdown(shutdown, srv, app); serr != nil {
		err = errors.Join(err, serr)
	}
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}
