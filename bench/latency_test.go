package bench

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// echoServer listens on network (a Unix socket in a temporary directory,
// or TCP on 127.0.0.1) and echoes every connection until closed; it returns
// the address.
func echoServer(t *testing.T, network string) string {
	t.Helper()
	addr := "127.0.0.1:0"
	if network == "unix" {
		dir, err := os.MkdirTemp("", "lp") // short: socket paths are limited to about 100 bytes
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		addr = filepath.Join(dir, "s")
	}
	ln, err := net.Listen(network, addr)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				io.Copy(c, c)
			}()
		}
	}()
	return ln.Addr().String()
}

func startProxy(t *testing.T, network, address string, delay time.Duration) *LatencyProxy {
	t.Helper()
	p, err := NewLatencyProxy(network, address, delay)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// TestLatencyProxyRoundTrip: a round trip through the proxy to a Unix
// socket takes at least twice the delay, and the bytes come back.
func TestLatencyProxyRoundTrip(t *testing.T) {
	const delay = 5 * time.Millisecond
	p := startProxy(t, "unix", echoServer(t, "unix"), delay)
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	buf := make([]byte, 4)
	for i := range 5 {
		msg := []byte{'p', 'i', 'n', byte('0' + i)}
		start := time.Now()
		if _, err := c.Write(msg); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(c, buf); err != nil {
			t.Fatal(err)
		}
		if rtt := time.Since(start); rtt < 2*delay {
			t.Errorf("round trip %d took %v, want at least 2×%v", i, rtt, delay)
		}
		if !bytes.Equal(buf, msg) {
			t.Errorf("round trip %d: got %q, want %q", i, buf, msg)
		}
	}
}

// TestLatencyProxyZeroDelay: with no delay the proxy forwards over TCP.
func TestLatencyProxyZeroDelay(t *testing.T) {
	p := startProxy(t, "tcp", echoServer(t, "tcp"), 0)
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 5)
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "hello" {
		t.Fatalf("got %q, %v; want hello", buf, err)
	}
}

// TestLatencyProxyConcurrentIntact: bytes written on concurrent
// connections, in chunks of random sizes while the echoes are read back,
// arrive intact and in order on each.
func TestLatencyProxyConcurrentIntact(t *testing.T) {
	for _, network := range []string{"unix", "tcp"} {
		t.Run(network, func(t *testing.T) {
			p := startProxy(t, network, echoServer(t, network), time.Millisecond)
			var wg sync.WaitGroup
			for i := range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					rng := rand.New(rand.NewPCG(uint64(i), 1))
					data := make([]byte, 256<<10)
					for j := range data {
						data[j] = byte(rng.Uint32())
					}
					c, err := net.Dial("tcp", p.Addr())
					if err != nil {
						t.Error(err)
						return
					}
					defer c.Close()
					got := make(chan []byte, 1)
					go func() {
						b, _ := io.ReadAll(c)
						got <- b
					}()
					for rest := data; len(rest) > 0; {
						n := min(len(rest), 1+rng.IntN(9000))
						if _, err := c.Write(rest[:n]); err != nil {
							t.Error(err)
							return
						}
						rest = rest[n:]
					}
					// Half-close: the echo server ends its copy, the proxy
					// passes the end on each way, ReadAll returns.
					c.(*net.TCPConn).CloseWrite()
					if b := <-got; !bytes.Equal(b, data) {
						t.Errorf("connection %d: %d bytes came back, want the %d sent, in order", i, len(b), len(data))
					}
				}()
			}
			wg.Wait()
		})
	}
}

// TestLatencyProxyCloseEndsGoroutines: Close, with connections open and
// data in flight, closes the clients' connections and ends every goroutine
// the proxy started.
func TestLatencyProxyCloseEndsGoroutines(t *testing.T) {
	echo := echoServer(t, "tcp")
	before := runtime.NumGoroutine()
	p, err := NewLatencyProxy("tcp", echo, 20*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	var conns []net.Conn
	for range 4 {
		c, err := net.Dial("tcp", p.Addr())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := c.Write(make([]byte, 100<<10)); err != nil { // in flight when Close comes
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	closed := make(chan error, 1)
	go func() { closed <- p.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		buf := make([]byte, 1<<16)
		t.Fatalf("Close has not returned after 10s:\n%s", buf[:runtime.Stack(buf, true)])
	}
	if err := p.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	for i, c := range conns {
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		_, err := io.Copy(io.Discard, c)
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Errorf("connection %d still open after Close", i)
		}
	}
	if _, err := net.Dial("tcp", p.Addr()); err == nil {
		t.Error("the proxy still accepts connections after Close")
	}
	// Close waited for the proxy's goroutines; the runtime counts them
	// until they have returned from their deferred calls.
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		buf := make([]byte, 1<<16)
		t.Errorf("%d goroutines after Close, %d before:\n%s", n, before, buf[:runtime.Stack(buf, true)])
	}
}

// TestLatencyProxyUnreachableUpstream: a connection the proxy cannot
// forward is closed.
func TestLatencyProxyUnreachableUpstream(t *testing.T) {
	p := startProxy(t, "unix", filepath.Join(t.TempDir(), "none"), time.Millisecond)
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := c.Read(make([]byte, 1)); n != 0 || !errors.Is(err, io.EOF) {
		t.Errorf("read %d bytes, %v; want the connection closed (EOF)", n, err)
	}
}

// TestNewLatencyProxyBadInput: an unknown network or a negative delay is
// refused.
func TestNewLatencyProxyBadInput(t *testing.T) {
	if _, err := NewLatencyProxy("udp", "127.0.0.1:1", 0); err == nil {
		t.Error("udp accepted")
	}
	if _, err := NewLatencyProxy("tcp", "127.0.0.1:1", -time.Millisecond); err == nil {
		t.Error("negative delay accepted")
	}
}

func TestPostgresUpstream(t *testing.T) {
	for _, c := range []struct{ url, network, address string }{
		{"postgres://postgres@/postgres?host=/tmp/pgdev", "unix", "/tmp/pgdev/.s.PGSQL.5432"},
		{"postgres://postgres@/postgres?host=/tmp/pgdev&port=5433", "unix", "/tmp/pgdev/.s.PGSQL.5433"},
		{"postgresql://u:pw@db.example:6000/app?sslmode=require", "tcp", "db.example:6000"},
		{"postgres://u@localhost/app", "tcp", "localhost:5432"},
	} {
		network, address, err := PostgresUpstream(c.url)
		if err != nil || network != c.network || address != c.address {
			t.Errorf("PostgresUpstream(%q) = %q, %q, %v; want %q, %q", c.url, network, address, err, c.network, c.address)
		}
	}
	for _, bad := range []string{"postgres:///app", "mysql://u@h/db", "postgres://u@h:x/db", "postgres://u@/db?host=a,b", "postgres://u@/db?host=/s&port=99999"} {
		if _, _, err := PostgresUpstream(bad); err == nil {
			t.Errorf("PostgresUpstream(%q) accepted", bad)
		}
	}
}

func TestLatencyProxyPostgresURL(t *testing.T) {
	p := startProxy(t, "unix", "/nonexistent/.s.PGSQL.5432", 0)
	got, err := p.PostgresURL("postgres://postgres@/postgres?host=/tmp/pgdev&application_name=b")
	if err != nil {
		t.Fatal(err)
	}
	want := "postgres://postgres@" + p.Addr() + "/postgres?application_name=b&sslmode=disable"
	if got != want {
		t.Errorf("PostgresURL = %q, want %q", got, want)
	}
}

// TestProxyPostgres connects to the test server through the proxy (with
// SOURCED_TEST_POSTGRES_URL set): the round trip of a query takes at least
// twice the delay.
func TestProxyPostgres(t *testing.T) {
	url := os.Getenv(PostgresURLEnv)
	if url == "" {
		t.Skip(PostgresURLEnv + " is not set")
	}
	const delay = 2 * time.Millisecond
	p, via, err := ProxyPostgres(url, delay)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, via)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var one int
	if err := conn.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil || one != 1 {
		t.Fatalf("SELECT 1 = %d, %v", one, err)
	}
	start := time.Now()
	if _, err := conn.Exec(ctx, "SELECT 1", pgx.QueryExecModeSimpleProtocol); err != nil {
		t.Fatal(err)
	}
	if rtt := time.Since(start); rtt < 2*delay {
		t.Errorf("query took %v through the proxy, want at least 2×%v", rtt, delay)
	}
	if rtt := medianRoundTrip(t, via); rtt < 2*delay {
		t.Errorf("medianRoundTrip = %v through the proxy, want at least 2×%v", rtt, delay)
	}
}
