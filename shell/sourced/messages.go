package sourced

import (
	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/core"
)

// Registry maps stable type strings to the Go types of an application's
// messages, validates payloads and extracts the attributes the log indexes
// (codec.Registry). Build one with NewRegistry and Register, give it to the
// store when you open it.
type Registry = codec.Registry

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return codec.NewRegistry() }

// Register registers the message type T under name, a stable string stored
// with every message of that type. A field tagged `sourced:"required"` is
// an attribute a message must carry: declare a command's partition keys so.
// Options (versions and upcasters of older payloads) are codec.Version and
// codec.Upcast.
func Register[T any](reg *Registry, name string, opts ...codec.Option) error {
	return codec.Register[T](reg, name, opts...)
}

// ErrInvalid matches every error that refuses an invalid payload (a
// *ValidationError): a web handler answers it with 400.
var ErrInvalid = codec.ErrInvalid

// ValidationError names the message type and every failing field of an
// invalid payload; it matches ErrInvalid.
type ValidationError = codec.ValidationError

// Message is a message of the log: its payload (one of the registered
// types), id, metadata, causation and correlation ids and time.
type Message = core.Message

// Partition names one partition of a decider, projector or projection:
// a value for each of its PartitionBy attributes, as Load takes it
// ({"course_id": "c1"}). Its String reads course_id:c1.
type Partition = core.Partition

// Messages wraps payloads in new messages, for Store.Append.
func Messages(payloads ...any) []Message { return core.Messages(payloads...) }
