package codec

import (
	"fmt"
	"strings"
)

// Option configures a message type at Register.
type Option func(*options)

type options struct {
	version   int
	versionAt int // how many times Version was given
	upcasts   map[int]func(map[string]any) (map[string]any, error)
	err       error
}

func (o *options) fail(err error) {
	if o.err == nil {
		o.err = err
	}
}

// Version sets the current schema version of the payload shape (default 1).
// Encode writes payloads at this version; Decode upcasts older ones to it.
func Version(n int) Option {
	return func(o *options) {
		if n < 1 {
			o.fail(fmt.Errorf("Version(%d): versions start at 1", n))
			return
		}
		o.versionAt++
		if o.versionAt > 1 && o.version != n {
			o.fail(fmt.Errorf("Version given twice (%d and %d)", o.version, n))
			return
		}
		o.version = n
	}
}

// Upcast registers fn to turn a stored payload of version from into
// version from+1, as raw JSON objects: old is the stored (or already
// upcast) object, with numbers as json.Number so that no precision is lost;
// fn returns the object at version from+1, which may be old itself,
// modified. Decode of a payload stored at version v runs the upcasters
// v, v+1, ... up to the current Version, then decodes the result.
//
// Register requires one upcaster for every version from 1 to Version-1.
func Upcast(from int, fn func(old map[string]any) (map[string]any, error)) Option {
	return func(o *options) {
		switch {
		case from < 1:
			o.fail(fmt.Errorf("Upcast(%d): versions start at 1", from))
		case fn == nil:
			o.fail(fmt.Errorf("Upcast(%d): nil function", from))
		case o.upcasts[from] != nil:
			o.fail(fmt.Errorf("Upcast(%d) given twice", from))
		default:
			if o.upcasts == nil {
				o.upcasts = map[int]func(map[string]any) (map[string]any, error){}
			}
			o.upcasts[from] = fn
		}
	}
}

// chain returns the upcasters indexed by version, checking the chain from
// version 1 to the current version is complete and goes no further.
func (o *options) chain() ([]func(map[string]any) (map[string]any, error), error) {
	if len(o.upcasts) == 0 && o.version == 1 {
		return nil, nil
	}
	chain := make([]func(map[string]any) (map[string]any, error), o.version)
	var missing []int
	for v := 1; v < o.version; v++ {
		fn, ok := o.upcasts[v]
		if !ok {
			missing = append(missing, v)
		}
		chain[v] = fn
	}
	for from := range o.upcasts {
		if from >= o.version {
			return nil, fmt.Errorf("Upcast(%d) goes from version %d to %d, past the current Version(%d)", from, from, from+1, o.version)
		}
	}
	if len(missing) > 0 {
		names := make([]string, len(missing))
		for i, v := range missing {
			names[i] = fmt.Sprintf("Upcast(%d) (version %d to %d)", v, v, v+1)
		}
		return nil, fmt.Errorf("the upcaster chain to Version(%d) is incomplete: missing %s", o.version, strings.Join(names, ", "))
	}
	return chain, nil
}
