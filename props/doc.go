// Package props holds Sourced's property-based tests, written with
// pgregory.net/rapid: codec round trips of generated payloads, replay
// determinism of deciders, the guard's conflict semantics against a naive
// model, causation and correlation chains, and (with the shell) model-based
// tests of the store. It has no non-test code; nothing imports it.
package props
