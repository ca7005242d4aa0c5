// Package cli is the sourced operator tool as a package: the commands of
// cmd/sourced (stats, log, trace, offsets, workers, partitions, groups,
// schedule, migrate, workflows, serve, topology, state, version), run
// against the stores a Driver opens.
//
// The root module's binary (cmd/sourced) runs it with the SQLite driver
// (SQLite); the pgstore module's (shell/pgstore/cmd/sourced) adds the
// PostgreSQL driver, so the same commands reach both kinds of store while
// pgx never enters a SQLite-only build. An application can build its own
// binary the same way, with its drivers:
//
//	func main() { cli.Main(cli.SQLite()) }
//
// With its reactors (WithReactors), the tool also draws their topology
// ('sourced topology') and serves their machines and topology in the
// dashboard:
//
//	func main() { cli.Main(cli.WithReactors(cli.SQLite(), app.Registry, app.Reactors()...)) }
//
// 'sourced state GROUP PARTITION [-at POSITION]' folds what the reactor of
// GROUP holds for the partition just after a position (its last by
// default; 0: before its first message) from the log, and prints it with
// the message it handles next, what that produced and, for a decision
// with a query of its own, each part of the query with what it read
// (dashboard.StateAt; -json for scripts). Step back and forth with -at.
//
// 'sourced topology -observe N' reads the log's N newest messages (in
// pages, never more) and shows, beside each handler's declared edges, how
// often the log shows them; a declared edge the log never shows and an
// edge the log shows that no handler declares are flagged in the output
// (and listed on stderr for the mermaid and svg formats); see
// topology.Observe.
//
// Every command prints a readable table, or JSON with -json (snake_case
// names throughout). Payloads are shown as stored (JSON): the tool needs
// none of the application's types. Flags go before or after the command
// (sourced -json log and sourced log -json are the same). Exit codes: 0
// success, 1 a failure while running (the message says what to do), 2 bad
// usage (unknown command or flag, missing or extra arguments).
package cli
