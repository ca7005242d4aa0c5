// Package pgtest finds the PostgreSQL server the store's tests run
// against, and gives each test a table prefix of its own.
package pgtest

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"
)

// EnvURL is the environment variable holding the test server's URL.
const EnvURL = "SOURCED_TEST_POSTGRES_URL"

// URL returns the test server's URL. Without one, the test is skipped
// with a message saying how to start a server, or fails under CI (CI=true),
// where the PostgreSQL tests must run.
func URL(t testing.TB) string {
	t.Helper()
	url := os.Getenv(EnvURL)
	if url != "" {
		return url
	}
	const how = EnvURL + ` is not set. Start a throwaway server (as a user other than root) and point the tests at it:
	initdb -D /tmp/pg -U postgres -A trust && pg_ctl -D /tmp/pg -o "-k /tmp -c listen_addresses=" -l /tmp/pg.log start
	export ` + EnvURL + `='postgres://postgres@/postgres?host=/tmp'
(.ci/run does this by itself.)`
	if os.Getenv("CI") == "true" {
		t.Fatal("the PostgreSQL tests must run under CI: " + how)
	}
	t.Skip(how)
	return ""
}

// Prefix returns a fresh table prefix, so that tests sharing a server never
// share tables.
func Prefix() string {
	var b [6]byte
	rand.Read(b[:])
	return "t" + hex.EncodeToString(b[:])
}
