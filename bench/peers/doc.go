// Package peers compares Sourced with other Go libraries on the same
// workloads. It is a module of its own (bench/peers/go.mod) so that the
// Sourced library never depends on the peers it is measured against. It has
// no non-test code; see README.md for what runs and how.
package peers
