// Package bench holds the Go benchmarks of what Sourced users pay for:
// encoding, decoding and key extraction of payloads, appends, reads by
// condition, claim scans and end-to-end command throughput. Run them with
//
//	go test ./bench -run XXX -bench . -benchmem
//
// It has no non-test code; nothing imports it.
package bench
