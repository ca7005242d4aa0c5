// Package statechart will hold Sourced's pure statechart interpreter and the
// event-sourced Machine reactor built on it: states, compound states and
// parallel regions, final states and done joins, guarded eventless
// transitions, entry/exit/after actions, history, child machines and parts,
// with SCXML as the reference semantics.
//
// It sits between effects and shell in the dependency order
// (codec <- core <- effects <- statechart <- shell) and, like core, performs
// no I/O: given a chart, a configuration, a context and a message, a step
// returns the next configuration and the events to append.
//
// The interpreter is not written yet; the package exists so that the
// layout is fixed and imports point the right way from the start.
package statechart
