// Command sourced is the operator's tool for a Sourced SQLite store: stats,
// the log, the causal chain of a message, consumer-group offsets,
// stopping/starting/resetting groups, pending scheduled messages, and
// installing the schema, and durable workflow runs.
//
//	go install github.com/sourced-go/sourced/cmd/sourced@latest
//	sourced -db app.db stats
//
// Every command prints a readable table, or JSON with -json. Payloads are
// shown as stored (JSON): the tool needs none of the application's types.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
)

func main() {
	code := run(context.Background(), os.Args[1:], os.Stdout, os.Stderr)
	os.Exit(code)
}

// run runs the command line args, writing to stdout and stderr, and
// returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	err := runErr(ctx, args, stdout)
	if err == nil {
		return 0
	}
	var ue *usageError
	if errors.As(err, &ue) {
		fmt.Fprintf(stderr, "sourced: %v\n\n%s", err, usage)
		return 2
	}
	fmt.Fprintf(stderr, "sourced: %v\n", err)
	return 1
}

type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return &usageError{fmt.Sprintf(format, args...)} }

const usage = `Usage: sourced [-db FILE] [-prefix PREFIX] [-json] COMMAND [ARGS]

Commands:
  stats                              the log's position and every consumer group
  log [-limit N] [-from P] [-desc] [-type T]... [-where k=v]...
                                     a page of the log (filters: type, attribute)
  trace ID                           the causal chain of message ID: every message
                                     sharing its correlation id
  offsets [-group G] [-limit N] [-from ID]
                                     consumer-group offsets, by id
  groups stop G [REASON] | start G | reset G
                                     operator commands on a consumer group
  schedule [-limit N]                messages waiting to be promoted
  migrate [-print]                   install the schema (or print its SQL)
  workflows [-workflow W] [-status S] [-limit N]
                                     durable workflow runs: counts per workflow, and
                                     each run's status and current step
  workflow [-workflow W] ID          one run with its steps

Options:
  -db FILE       the SQLite file (default $SOURCED_DB)
  -prefix NAME   the table prefix (default "sourced")
  -json          JSON output for scripts
`
