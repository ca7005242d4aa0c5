// Package readme holds the snippets of the repository's README.md as
// compiled and running code: the tour's message types, decider and unit
// test, the web snippet as an Example on a SQLite file, and the machine with
// its Mermaid diagram (the PostgreSQL, workflow and snapshot snippets are the
// Examples of shell/pgstore, shell/workflow and shell). TestREADMESnippetsAreCompiled fails when a Go
// snippet of the README no longer appears in one of them, line for line,
// so the README cannot drift from code that compiles.
package readme
