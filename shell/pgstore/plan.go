package pgstore

import (
	"strconv"
	"strings"
)

// Plans. A session prepares each statement the store sends once (pgx's
// statement cache), and PostgreSQL plans a prepared statement either
// once for any parameters (a generic plan) or afresh for each call's
// values (a custom plan), as long as it estimates that the custom plans
// pay. For the store's claims, reads and acknowledgements it estimated
// so at every call, and the planning cost more than the execution:
// measured with pg_stat_statements (track_planning on) over
// BenchmarkPostgresEndToEnd, the partitioned claim planned for 0.52 ms a
// call beside 0.16 ms of execution, the partition read for 0.12 ms beside
// 0.10 ms, 7.2 s of the server's time in all beside 9.4 s of execution.
//
// So the store's sessions plan once: each runs with plan_cache_mode =
// force_generic_plan (genericPlans, sent when the pool connects), unless
// the connection URL names a plan_cache_mode itself (a parameter, or in
// options=-c ...), which it keeps. A generic plan knows no parameter's
// value, and a LIMIT given as a parameter it must expect to let a tenth
// of the rows through: forced generic, the queue's claim sorted every
// pending offset instead of walking the ordered index, and drained at a
// sixth of its rate. So the claims and reads write their limits into the
// statement as numbers (limited, limitSQL). Measured (this 2-core machine,
// the same binary with plan_cache_mode=auto in the URL and without):
// BenchmarkPostgresHandle 833 -> 1,016 cmds/s, BenchmarkPostgresEndToEnd
// 629-900 -> 1,005-1,064 cmds/s with half the p99, BenchmarkClaimAck
// (store=postgres) even (1,159-1,267 claims/s; the numbers written in
// took it from 791), the queue drain even. The statistics the plans are
// made from are kept current as the tables grow (analyze.go), and a plan
// is made again when they change.

// genericPlans sets the session's plan cache mode (see above).
const genericPlans = `SET plan_cache_mode = force_generic_plan`

// namesPlanMode reports whether the connection's runtime parameters name
// a plan_cache_mode, directly or in options.
func namesPlanMode(params map[string]string) bool {
	if _, ok := params["plan_cache_mode"]; ok {
		return true
	}
	return strings.Contains(params["options"], "plan_cache_mode")
}

// limited returns the statement template stmt with its {partitions} and
// {batch} limits written in. The few a store's claims ask for (its batch
// size, one partition or its workers' number) are kept, built once;
// past maxLimited combinations (limits chosen by callers, a page size)
// each is built at its call.
func (s *Store) limited(stmt string, partitions, batch int) string {
	k := limitKey{stmt, partitions, batch}
	s.limitsMu.Lock()
	out, ok := s.limits[k]
	s.limitsMu.Unlock()
	if ok {
		return out
	}
	out = strings.NewReplacer("{partitions}", strconv.Itoa(partitions), "{batch}", strconv.Itoa(batch)).Replace(stmt)
	s.limitsMu.Lock()
	if s.limits == nil {
		s.limits = map[limitKey]string{}
	}
	if len(s.limits) < maxLimited {
		s.limits[k] = out
	}
	s.limitsMu.Unlock()
	return out
}

// limitKey names a statement with its limits written in.
type limitKey struct {
	stmt              string
	partitions, batch int
}

// maxLimited bounds the statements limited keeps.
const maxLimited = 64

// limitSQL is a LIMIT clause of n rows, none for n <= 0.
func limitSQL(n int) string {
	if n <= 0 {
		return "ALL"
	}
	return strconv.Itoa(n)
}

// claimBound is the limit written into a claim statement for a claim of
// up to n partitions: n rounded up to a power of two. The statement
// takes n itself as a parameter, applied above the locking pick, so that
// it locks and claims no more than n offsets: its plan is made for the
// bound, and a session prepares one claim statement for each bound where
// it prepared one for each n. Measured over BenchmarkPostgresEndToEnd,
// whose workers claim as many partitions as they have room for (1 to
// 32), a run planned the claim 489 times in 7,290 calls (0.8 ms a plan;
// a prepare is a round trip of its own).
func claimBound(n int) int {
	b := 1
	for b < n {
		b <<= 1
	}
	return b
}
