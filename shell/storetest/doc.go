// Package storetest is the conformance suite of shell.Store: the behaviour
// every store implementation must have, as tests that any implementation
// runs against itself. The SQLite store and the in-memory store both pass
// it; a new store (another database, a wrapper with caching or metrics)
// proves it behaves the same by passing it too.
//
// # Using the suite
//
// Call Run from a test of the implementation's package with a Factory that
// opens a fresh, installed, empty store per call. The factory must use the
// registry, clock and notifier it is given (the suite registers its own
// fixture message types, drives the clock to schedule and promote
// messages, and records notifications) and register the store's cleanup
// with t:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T, reg *codec.Registry, now func() time.Time, n shell.Notifier) shell.Store {
//			s, err := mystore.Open(t.Context(), filepath.Join(t.TempDir(), "store.db"),
//				mystore.Options{Registry: reg, Now: now, Notifier: n})
//			if err != nil {
//				t.Fatalf("open: %v", err)
//			}
//			t.Cleanup(func() { s.Close() })
//			return s
//		})
//	}
//
// Every subtest opens its own store, so stores are never shared between
// tests; the factory may be called from a goroutine other than the test's
// (the model-based part opens one store per rapid check in a subtest).
//
// # What it covers
//
//   - Append: consecutive positions, stamping (UUID v7 ids, the store's
//     clock, causation and correlation defaulting to the own id), envelopes
//     and metadata kept, payload round trips, key pairs indexed (canonical
//     ints, bools, times; every element of a slice attribute), empty
//     appends, one notification of the distinct types per commit.
//   - BadInput: unregistered types, invalid payloads (a required attribute,
//     a Validate method) and duplicate ids (in the log, the schedule, the
//     batch) fail with an error matching codec.ErrUnregistered,
//     codec.ErrInvalid or shell.ErrDuplicateID, and write nothing.
//   - Guard: conflicts and non-conflicts, empty reads and new partitions
//     that still guard (hazard H3, concurrently too), stale guards,
//     type-only conditions, the *core.ConflictError and its messages,
//     rejected appends that write nothing, guards that see their own
//     transaction's writes.
//   - WriteSkew: pairs of writers whose guards draw their boundaries
//     differently, each appending what the other's guard matches: exactly
//     one of the two succeeds, in either order and concurrently.
//   - Read, ReadPartition: OR across conditions, AND within, conditional AND
//     for partitions (the table of the store contracts), After, Upto, Limit
//     and the guard position rules.
//   - ReadAll: paging both ways with and without conditions, the inclusive
//     cursor, Page.Next, All, and that descending pages with conditions end
//     (hazard H12).
//   - Schedule: future-dated messages, NextScheduled, PromoteScheduled in
//     scheduling order, promoted messages indexed and guarded, times compared
//     as instants across zones and below a second (hazard H10).
//   - Update: commits together, reads see own writes, errors and panics
//     roll everything back, subscribers are told after the commit only
//     (hazard H11), other readers never see half a transaction.
//   - Concurrency: concurrent appends keep every message once with no gap;
//     concurrent guarded appends are linearizable (each successful append
//     is checked against the final log, and some must have conflicted).
//   - Model: a rapid state-machine test comparing the store with a simple
//     model after every step of random appends (guarded, transactional,
//     rolled back, invalid, duplicate, scheduled), reads, partition reads,
//     pages and promotions.
//
// With -short the concurrent and model-based parts do less work (rapid's
// own -rapid.checks and -rapid.steps flags tune the model further). When
// the model finds a failure, rapid shrinks it, prints the steps and saves
// them under testdata/rapid of the package running the suite, to replay
// with -rapid.failfile (-rapid.nofailfile turns the saving off).
//
// Where the store contract leaves a choice open the suite accepts either
// answer: a promoted message may keep its due time or take its promotion
// time as CreatedAt (and may carry "scheduled_at" metadata); a read that
// returns exactly Limit messages with no more to find may put its guard at
// the last one or at the bound; a commit that only scheduled messages may
// announce them or not.
package storetest
