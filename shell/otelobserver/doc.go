// Package otelobserver is a shell.Observer that records what the router,
// the runtime and Handle observe as OpenTelemetry metrics and traces. It is
// a Go module of its own, so that the library carries no telemetry
// dependency:
//
//	obs, err := otelobserver.New(otelobserver.Options{}) // the global providers
//	rt, err := shell.NewRuntime(store, shell.Config{Workers: 4, Observer: obs}, reactors...)
//
// # Metrics
//
// Counters and histograms, each with the attribute sourced.group:
//
//	sourced.batches               batches handled and committed (sourced.inline: one transaction with others)
//	sourced.batch.duration        s, history read + reactor + commit
//	sourced.batch.size            messages claimed per batch
//	sourced.messages.appended     messages appended by batches and by Handle
//	sourced.append.duration       s, a synchronous Handle's transaction
//	sourced.claims                partitions claimed
//	sourced.guard.conflicts       appends that met a conflicting message (sourced.partition, sourced.retried)
//	sourced.failures              batches that went to the error strategy (sourced.outcome: retrying, parked, failed)
//	sourced.scheduled.promoted    scheduled messages promoted into the log (no group)
//
// and, once RegisterLag is called with a store that counts it (sqlitestore,
// pgstore), the gauges sourced.lag (pending messages per group) and
// sourced.lag.partitions (partitions with pending work), read from the
// store at each collection.
//
// Guard conflicts carry the partition, because which consistency
// boundaries are hot is what they are for; conflicts are rare, so the
// attribute's cardinality stays bounded by the contended partitions. Set
// Options.ConflictPartitions to false to leave it out.
//
// # Traces
//
// Every batch is a span ("sourced.batch <group>", kind consumer) from the
// start of its handling to its commit, with the group, partition, worker,
// positions and message count as attributes. A batch's trace is the
// correlation id of its messages (a UUID is 16 bytes, as a trace id): the
// batches of one causal chain (a command, its events, the reactions they
// dispatch, the commands those dispatch...) are spans of one trace, the
// command's, whichever process handled them. A batch of several chains is
// in the first one's trace and links to the others.
package otelobserver
