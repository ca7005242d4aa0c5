package cli

import (
	"context"
	"errors"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/shell/topology"
)

// WithReactors gives the commands an application's reactors and the
// registry of their types: 'sourced topology' draws their message-flow
// graph, and 'sourced serve' shows it with their machines and workflows.
// An application builds its own tool with them:
//
//	func main() { cli.Main(cli.WithReactors(cli.SQLite(), app.Registry, app.Reactors()...)) }
//
// The driver opens stores as d does.
func WithReactors(d Driver, reg *codec.Registry, reactors ...any) Driver {
	return reactorDriver{Driver: d, reg: reg, reactors: reactors}
}

type reactorDriver struct {
	Driver
	reg      *codec.Registry
	reactors []any
}

// RegistryOpener is a Driver that can open a store knowing the
// application's types: payloads are still read raw (as stored JSON), but
// reads that need the types (a partition read, as a machine's page on
// 'sourced serve' makes) work. A driver given to WithReactors opens its
// stores so when it implements it; both SQLite() and pgcli.Driver() do.
type RegistryOpener interface {
	OpenRegistry(ctx context.Context, db, prefix string, reg *codec.Registry) (Store, error)
}

// Open opens the store with the application's registry when the driver
// can (RegistryOpener).
func (d reactorDriver) Open(ctx context.Context, db, prefix string) (Store, error) {
	if ro, ok := d.Driver.(RegistryOpener); ok && d.reg != nil {
		return ro.OpenRegistry(ctx, db, prefix, d.reg)
	}
	return d.Driver.Open(ctx, db, prefix)
}

// reactors returns the reactors a driver was given with WithReactors.
func (g *globals) reactors() (*codec.Registry, []any) {
	for _, d := range g.drivers {
		if rd, ok := d.(reactorDriver); ok {
			return rd.reg, rd.reactors
		}
	}
	return nil, nil
}

// errNoReactors says why the stock tool has no topology.
var errNoReactors = errors.New("this sourced binary knows no reactors: the topology is your application's. Build your own tool with them: func main() { cli.Main(cli.WithReactors(cli.SQLite(), registry, reactors...)) }")

func (g *globals) topology(ctx context.Context, args []string) error {
	fs := g.flags("topology")
	format := fs.String("format", "json", "")
	if _, err := g.parse(fs, args, 0, 0, ""); err != nil {
		return g.helpOr(err)
	}
	if g.json {
		*format = "json"
	}
	switch topology.Format(*format) {
	case topology.FormatJSON, topology.FormatMermaid, topology.FormatEventModel:
	default:
		return g.usagef("-format %q: want json, mermaid or svg", *format)
	}
	reg, reactors := g.reactors()
	if len(reactors) == 0 {
		return errNoReactors
	}
	graph, err := topology.Of(reg, reactors...)
	if err != nil {
		return err
	}
	return topology.Render(g.out, graph, topology.Format(*format))
}
