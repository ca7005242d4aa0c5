// Package shell is the imperative shell of Sourced: everything that touches
// the world. This package holds the Store interface that every store
// implementation satisfies (the SQLite store in sqlitestore, the in-memory
// twin in memstore, proved alike by the conformance suite in storetest),
// the Notifier that announces committed appends, and the errors callers
// match with errors.Is.
//
// Every store call that may block takes a context.Context first. Every
// transaction that reads and then writes is a write transaction from its
// start (BEGIN IMMEDIATE on SQLite), so a decision's read and its guarded
// append can never be separated by another writer's commit.
package shell
