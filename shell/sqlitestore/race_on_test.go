//go:build race

package sqlitestore_test

// raceEnabled is set when the tests run under the race detector, which
// makes this SQLite (C translated to Go: every memory access is
// instrumented) 10-20 times slower; the longest tests then do less work.
const raceEnabled = true
