package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/sourced-go/sourced/shell/dashboard"
)

// serve runs the web dashboard (package shell/dashboard) of the store on
// a loopback address until ctx ends (Ctrl-C). The dashboard has no
// authentication of its own, so the tool refuses any other address: to
// reach it from elsewhere, mount dashboard.New in the application's server
// behind its authentication, or tunnel (ssh -L).
func (g *globals) serve(ctx context.Context, args []string) error {
	fs := g.flags("serve")
	addr := fs.String("addr", "127.0.0.1:8080", "")
	readOnly := fs.Bool("read-only", false, "")
	refresh := fs.Duration("refresh", 0, "")
	if _, err := g.parse(fs, args, 0, 0, ""); err != nil {
		return g.helpOr(err)
	}
	host, _, err := net.SplitHostPort(*addr)
	if err != nil {
		return g.usagef("-addr %q: want host:port, such as 127.0.0.1:8080 (%v)", *addr, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return g.usagef("-addr %q: the dashboard has no authentication, so serve listens on a loopback address only (127.0.0.1, ::1, localhost); to reach it from elsewhere mount dashboard.New behind your application's authentication, or use ssh -L", *addr)
	}
	s, err := g.open(ctx)
	if err != nil {
		return err
	}
	defer s.Close()
	reg, reactors := g.reactors() // a tool built with WithReactors: topology, machines
	// Only the loopback names and the address served are accepted as Host:
	// a page of another site resolving its own name to the loopback
	// address (DNS rebinding) is refused.
	hosts := []string{"localhost", "127.0.0.1", "::1", host}
	dash, err := dashboard.New(s, dashboard.Options{ReadOnly: *readOnly, Refresh: *refresh, Logger: quiet, Reactors: reactors, Registry: reg, Hosts: hosts})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	// Requests live in ctx, so the dashboard's live streams end with it.
	srv := &http.Server{Handler: dash, ReadHeaderTimeout: 10 * time.Second, BaseContext: func(net.Listener) context.Context { return ctx }}
	mode := ""
	if *readOnly {
		mode = " read-only"
	}
	fmt.Fprintf(g.out, "serving the%s dashboard of %s on http://%s/ (Ctrl-C to stop)\n", mode, redact(g.db), ln.Addr())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err = srv.Shutdown(shut) // the live-update streams end with the server
	if errors.Is(err, context.DeadlineExceeded) {
		err = srv.Close()
	}
	if serr := <-done; !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	return err
}
