package shell

import (
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/sourced-go/sourced/core"
)

// Bundle is implemented by values that stand for several reactors: a
// statechart machine with the child machines it starts (recursively), or a
// bounded context's module. Registering a Bundle registers every
// definition Reactors returns, and a definition that is itself a Bundle
// (a module's machine) brings its own: a module registers its machines'
// children too. The same reactor reached twice is registered once.
//
// A Bundle holds core definitions only; a set of reactors of any kind
// (workflows and hand-written effects.Reactor values too) is a
// ReactorSet, such as a Module.
type Bundle interface {
	Reactors() []core.Definition
}

// ReactorSet is implemented by values that stand for several reactors of
// any kind NewRouter takes: core definitions, workflows (shell/workflow),
// hand-written effects.Reactor values, Bundles and other sets. Registering
// a ReactorSet registers every member, expanded as NewRouter expands its
// arguments (recursively, the same reactor once).
type ReactorSet interface {
	Members() []any
}

// Module is a ReactorSet of the reactors listed: a bounded context's
// deciders, projectors, machines, workflows and hand-written reactors,
// registered together.
//
//	var Courses = shell.Module{courseDecider, catalog, lifecycle, paymentWorkflow, mailer}
//	rt, err := shell.NewRuntime(store, shell.DefaultConfig(), Courses, Billing)
type Module []any

// Members returns the module's reactors.
func (m Module) Members() []any { return m }

// Expand returns the reactors NewRouter registers for reactors: Bundles
// and ReactorSets replaced by their members, recursively, and a reactor
// reached twice (the same value, or a copy of it) kept once, in the
// order first reached. Tools that list an application's reactors
// (shell/topology, shell/dashboard) expand them with it.
func Expand(reactors ...any) []any { return expand(reactors) }

// expand replaces bundles and sets by their reactors, recursively, and
// drops a reactor registered twice (the same value, or a copy of it).
func expand(xs []any) []any {
	var out []any
	var visited []any // the bundles expanded so far
	add := func(x any) {
		for _, y := range out {
			if sameReactor(x, y) {
				return
			}
		}
		out = append(out, x)
	}
	var walk func(x any)
	walk = func(x any) {
		var members []any
		switch b := x.(type) {
		case ReactorSet:
			members = b.Members()
		case Bundle:
			for _, d := range b.Reactors() {
				if d != nil {
					members = append(members, d)
				}
			}
		default:
			add(x)
			return
		}
		for _, v := range visited {
			if sameReactor(v, x) {
				add(x) // a machine lists itself among its reactors
				return
			}
		}
		visited = append(visited, x)
		for _, m := range members {
			walk(m)
		}
	}
	for _, x := range xs {
		walk(x)
	}
	return out
}

// sameReactor reports whether a and b are the same reactor: the same
// value or a copy of it (definitions are values: a copy shares their
// compiled handlers). Pointers, maps and functions are compared by
// identity, never followed, so two reactors built alike are different
// reactors.
func sameReactor(a, b any) bool {
	if a == nil || b == nil {
		return a == b
	}
	return identical(reflect.ValueOf(a), reflect.ValueOf(b))
}

func identical(a, b reflect.Value) bool {
	if a.IsValid() != b.IsValid() {
		return false
	}
	if !a.IsValid() {
		return true
	}
	if a.Type() != b.Type() {
		return false
	}
	switch a.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Chan, reflect.Func, reflect.UnsafePointer:
		return a.Pointer() == b.Pointer()
	case reflect.Interface:
		if a.IsNil() || b.IsNil() {
			return a.IsNil() == b.IsNil()
		}
		return identical(a.Elem(), b.Elem())
	case reflect.Slice:
		if a.Len() != b.Len() {
			return false
		}
		if a.Len() == 0 || a.Pointer() == b.Pointer() {
			return true
		}
		fallthrough
	case reflect.Array:
		for i := range a.Len() {
			if !identical(a.Index(i), b.Index(i)) {
				return false
			}
		}
		return true
	case reflect.Struct:
		for i := range a.NumField() {
			if !identical(a.Field(i), b.Field(i)) {
				return false
			}
		}
		return true
	case reflect.Bool:
		return a.Bool() == b.Bool()
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return a.Int() == b.Int()
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return a.Uint() == b.Uint()
	case reflect.Float32, reflect.Float64:
		return a.Float() == b.Float()
	case reflect.Complex64, reflect.Complex128:
		return a.Complex() == b.Complex()
	case reflect.String:
		return a.String() == b.String()
	}
	return false
}

// describeReactor names a registered reactor for an error: its Go type
// and what it handles.
func describeReactor(re *reactor) string {
	src := re.src
	if src == nil {
		src = re.r
	}
	return fmt.Sprintf("%T handling %s", src, strings.Join(re.info.Handled, ", "))
}

// DuplicateGroupError is returned by NewRouter (and NewRuntime) for two
// different reactors with one consumer group id: each group has one
// reactor. (The same reactor registered twice is registered once.) It
// matches core.ErrDefinition.
type DuplicateGroupError struct {
	Group string
	// First and Second describe the two reactors (Go type and handled
	// types), in registration order.
	First, Second string
}

func (e *DuplicateGroupError) Error() string {
	return fmt.Sprintf("sourced: two different reactors share the consumer group id %q: %s, and %s; give one of them a group id of its own", e.Group, e.First, e.Second)
}

// Is makes errors.Is(err, core.ErrDefinition) true.
func (e *DuplicateGroupError) Is(target error) bool { return target == core.ErrDefinition }

// MissingReactorsError is returned by NewRouter (and NewRuntime) when a
// registered machine starts child machines that are not registered: the
// children's groups would never run, and the parent would wait for them
// forever. It happens when the machine reaches the router in a form that
// does not bring its children (adapted by effects.FromDefinition, or
// wrapped); register the machine itself, or a Bundle holding it, which
// registers its children. It matches core.ErrDefinition.
type MissingReactorsError struct {
	// Group is the parent's group id.
	Group string
	// Missing are the group ids of the children not registered.
	Missing []string
}

func (e *MissingReactorsError) Error() string {
	return fmt.Sprintf("sourced: machine %s starts child machines that are not registered: %s; register the machine itself (or a shell.Bundle holding it), which registers its children", e.Group, strings.Join(e.Missing, ", "))
}

// Is makes errors.Is(err, core.ErrDefinition) true.
func (e *MissingReactorsError) Is(target error) bool { return target == core.ErrDefinition }

// missingChildren reports, for every registered definition that is a
// Bundle (a machine), the reactors it brings that are not registered.
func (rt *Router) missingChildren() []error {
	var errs []error
	for _, re := range rt.reactors {
		b, ok := re.def.(Bundle)
		if !ok {
			continue
		}
		var missing []string
		for _, d := range b.Reactors() {
			if d == nil {
				continue
			}
			if g := d.Spec().Group; rt.byGroup[g] == nil && !slices.Contains(missing, g) {
				missing = append(missing, g)
			}
		}
		if len(missing) > 0 {
			errs = append(errs, &MissingReactorsError{Group: re.info.Group, Missing: missing})
		}
	}
	return errs
}
