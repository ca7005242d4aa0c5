// Command sourced is the operator's tool for a Sourced store: stats and
// lag, the log (and following it), the causal chain of a message,
// consumer-group offsets and workers, parked partitions, stopping,
// starting, resetting and retrying groups, scheduled messages, schema
// migrations, durable workflow runs, and the web dashboard (serve).
//
//	go install github.com/sourced-go/sourced/cmd/sourced@latest
//	sourced -db app.db stats
//
// This binary opens SQLite files. The same tool with PostgreSQL as well
// (-db postgres://...) is built from the pgstore module, so that pgx stays
// out of a SQLite-only build:
//
//	go install github.com/sourced-go/sourced/shell/pgstore/cmd/sourced@latest
//
// The commands live in package cli (github.com/sourced-go/sourced/cmd/
// sourced/cli); run 'sourced help' for the list.
package main

import "github.com/sourced-go/sourced/cmd/sourced/cli"

func main() { cli.Main(cli.SQLite()) }
