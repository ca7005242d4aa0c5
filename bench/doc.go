// Package bench (a Go module of its own, so that the root module depends
// on neither pgx nor River) holds the Go benchmarks of what Sourced users pay for:
// encoding, decoding and key extraction of payloads, appends, reads by
// condition, claim scans and end-to-end command throughput. Run them with
//
//	cd bench && go test -run XXX -bench . -benchmem
//
// Its non-test code is QueueDrain, the queue drain shared with the
// bench/peers module (a separate module that measures Sourced against
// River, so that the library never depends on River), and LatencyProxy, a
// TCP proxy that adds a delay each way in front of a PostgreSQL server on
// this machine (ProxyPostgres), so that the benchmarks measure what
// application servers on other hosts would see (rtt=500us in
// BenchmarkPostgresAppendParallel); nothing else imports this package.
//
// Floors: BenchmarkPostgresAppendParallel's impl=floor,
// BenchmarkPostgresHandleFloor and BenchmarkPostgresEndToEndFloor do the
// work of the benchmark they bound as bare pgx programs on tables the
// library installed (tests hold them to the store's rows), so that run
// beside it in the same minutes they tell the store's overhead from what
// this machine and this server allow:
//
//	go test -run '^$' -bench 'PostgresEndToEnd$|PostgresEndToEndFloor' -benchtime 1x
package bench
