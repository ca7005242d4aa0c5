// Command sourced is the Sourced operator tool with both stores: SQLite
// files and PostgreSQL databases (-db postgres://...). It is the root
// module's cmd/sourced, the same commands, built in the pgstore module so
// that the root module never depends on pgx.
//
//	go install github.com/sourced-go/sourced/shell/pgstore/cmd/sourced@latest
//	sourced -db postgres://app@db.internal/app stats
//	sourced -db app.db stats
package main

import (
	"github.com/sourced-go/sourced/cmd/sourced/cli"
	"github.com/sourced-go/sourced/shell/pgstore/pgcli"
)

func main() { cli.Main(cli.SQLite(), pgcli.Driver()) }
