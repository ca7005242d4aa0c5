package core

import (
	"errors"
	"fmt"
	"reflect"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/internal/textclip"
)

// ErrUnknownMessage is matched by the error of building a command whose
// type is unknown or outside a CommandContext's scope.
var ErrUnknownMessage = errors.New("sourced: unknown message")

// CommandHook enriches or transforms a command being built, with the
// request-scoped value app (a session, a request): it returns the
// (possibly modified) command, or an error that stops the build.
type CommandHook[A any] func(app A, cmd Message) (Message, error)

// CommandContext builds commands from raw input (a type string and a
// payload decoded from JSON, say) for web handlers: it decodes and
// validates the payload, adds default metadata, and runs hooks that enrich
// the command from a request-scoped value of type A. A scope restricts
// which command types may be built at all.
//
// Build a CommandContext once at start-up with NewCommandContext and the
// With* methods (each returns a new value), then call Build per request.
//
// A CommandContext builds commands only: the types the deciders (and
// machines) given to WithCommandsOf decide, or those WithScope or
// WithScopeFunc name. Until given one of them it builds nothing, so that
// raw client input can never become an event or a workflow's internal
// message; AllowAnyType opts in to every registered type explicitly.
type CommandContext[A any] struct {
	reg      *codec.Registry
	metadata map[string]any
	scope    func(*codec.Type) bool
	on       map[reflect.Type][]CommandHook[A]
	any      []CommandHook[A]
}

// NewCommandContext returns a context that builds commands of the types
// registered in reg that it is told are commands (WithCommandsOf,
// WithScope, WithScopeFunc): none until then, and events or internal
// types only with AllowAnyType.
func NewCommandContext[A any](reg *codec.Registry) CommandContext[A] {
	return CommandContext[A]{reg: reg}
}

// WithCommandsOf restricts the types that may be built to the commands
// the definitions decide (their FlowDecide handlers: a Decider's Decide
// handlers, a machine's command transitions), replacing any other scope.
// Building any other type, their events included, fails with
// ErrUnknownMessage.
func (c CommandContext[A]) WithCommandsOf(defs ...Describer) CommandContext[A] {
	set := map[reflect.Type]bool{}
	for _, d := range defs {
		for _, f := range d.Describe().Flows {
			if f.Kind == FlowDecide && f.Consumes != nil {
				set[f.Consumes] = true
			}
		}
	}
	c.scope = func(t *codec.Type) bool { return set[t.GoType] }
	return c
}

// AllowAnyType lets the context build any type registered in its
// registry, events and internal types (a workflow's own messages)
// included, replacing any other scope. Only for trusted input: a client
// able to send a type string could then append any fact.
func (c CommandContext[A]) AllowAnyType() CommandContext[A] {
	c.scope = func(*codec.Type) bool { return true }
	return c
}

// WithMetadata adds default metadata to every command built.
func (c CommandContext[A]) WithMetadata(md map[string]any) CommandContext[A] {
	m := make(map[string]any, len(c.metadata)+len(md))
	for k, v := range c.metadata {
		m[k] = v
	}
	for k, v := range md {
		m[k] = v
	}
	c.metadata = m
	return c
}

// WithScope restricts the types that may be built to those in allow (type
// strings); building any other type fails with ErrUnknownMessage.
func (c CommandContext[A]) WithScope(allow ...string) CommandContext[A] {
	set := map[string]bool{}
	for _, a := range allow {
		set[a] = true
	}
	c.scope = func(t *codec.Type) bool { return set[t.Name] }
	return c
}

// WithScopeFunc restricts the types that may be built to those allow
// accepts.
func (c CommandContext[A]) WithScopeFunc(allow func(*codec.Type) bool) CommandContext[A] {
	c.scope = allow
	return c
}

// On adds a hook for commands of type C. Hooks for one type run in the
// order they were added, before the hooks added with Any.
func On[C, A any](c CommandContext[A], hook CommandHook[A]) CommandContext[A] {
	t := reflect.TypeFor[C]()
	on := make(map[reflect.Type][]CommandHook[A], len(c.on)+1)
	for k, v := range c.on {
		on[k] = v
	}
	on[t] = append(append([]CommandHook[A]{}, on[t]...), hook)
	c.on = on
	return c
}

// Any adds a hook for every command, run after the per-type hooks.
func (c CommandContext[A]) Any(hook CommandHook[A]) CommandContext[A] {
	c.any = append(append([]CommandHook[A]{}, c.any...), hook)
	return c
}

// Build builds a command of type typ from raw attributes: unknown or
// out-of-scope types fail with ErrUnknownMessage; invalid attributes fail
// with a *codec.ValidationError listing every failing field.
func (c CommandContext[A]) Build(app A, typ string, raw map[string]any) (Message, error) {
	t, err := c.reg.ByName(typ)
	if err != nil || !c.allows(t) {
		return Message{}, fmt.Errorf("%w: %s cannot be built here%s", ErrUnknownMessage, quoteShort(typ), c.noScope())
	}
	payload, err := t.FromMap(raw)
	if err != nil {
		return Message{}, err
	}
	return c.finish(app, t, payload)
}

// BuildPayload builds a command from a payload value: it checks the type
// is registered and in scope, validates it, and runs the hooks.
func (c CommandContext[A]) BuildPayload(app A, payload any) (Message, error) {
	m := NewMessage(payload)
	t, err := c.reg.TypeOf(m.Payload)
	if err != nil || !c.allows(t) {
		return Message{}, fmt.Errorf("%w: %T cannot be built here%s", ErrUnknownMessage, m.Payload, c.noScope())
	}
	if err := t.Validate(m.Payload); err != nil {
		return Message{}, err
	}
	return c.finish(app, t, m)
}

// allows reports whether t may be built: never without a scope.
func (c CommandContext[A]) allows(t *codec.Type) bool {
	return c.scope != nil && c.scope(t)
}

// noScope explains a refusal by a context given no scope.
func (c CommandContext[A]) noScope() string {
	if c.scope != nil {
		return ""
	}
	return ": this CommandContext builds no type until told its commands (WithCommandsOf the deciders, WithScope or WithScopeFunc; AllowAnyType for trusted input only)"
}

// quoteShort quotes s for an error message, cut to 100 bytes.
func quoteShort(s string) string {
	return textclip.Quote(s, 100)
}

func (c CommandContext[A]) finish(app A, t *codec.Type, payload any) (Message, error) {
	m := NewMessage(payload)
	m.Type = t.Name
	m = m.WithMetadata(c.metadata)
	var err error
	for _, h := range c.on[t.GoType] {
		if m, err = h(app, m); err != nil {
			return Message{}, err
		}
	}
	for _, h := range c.any {
		if m, err = h(app, m); err != nil {
			return Message{}, err
		}
	}
	return m, nil
}
