// Package codec is the message type registry of Sourced: it maps the type
// strings stored in the log ("courses.created") to Go struct types and
// back, encodes payloads to JSON at the store boundary, extracts the key
// pairs every message is indexed under, validates payloads with errors
// that name the type and the attribute, and upcasts payloads stored in an
// older shape.
//
// It imports only the standard library and holds no package-level state:
// a Registry is a value the application builds at start-up and passes to
// the store and the router.
//
// # Registry
//
// Register compiles a payload struct once: its JSON attributes (as
// encoding/json sees them, embedded structs flattened), a key extractor per
// indexed attribute, its decoder and its upcaster chain. A payload the codec
// could not store and read back fails here, not at 3 a.m., with the type
// and the attribute path:
//
//	type CourseCreated struct {
//		CourseID string    `json:"course_id" sourced:"required"`
//		Name     string    `json:"name"`
//		Seats    int       `json:"seats"`
//		Tags     []string  `json:"tags"`
//		StartsOn time.Time `json:"starts_on"`
//	}
//
//	reg := codec.NewRegistry()
//	codec.MustRegister[CourseCreated](reg, "courses.created")
//
// Type strings are lower-case letters, digits, '.', '_' and '-', starting
// with a letter or a digit. Lookups (ByName, ByGoType, TypeOf) take no lock
// and are safe while other goroutines register.
//
// # JSON
//
// Payloads are stored as the JSON encoding/json writes for the struct, so
// `json` tags apply. Go values round-trip exactly: strings, every integer
// size (uint64 included, written as JSON integers), floats (NaN and
// infinities are encode errors), bools, time.Time (RFC 3339 with every
// nanosecond; the zone comes back as a fixed UTC offset, so compare times
// with Equal), slices, maps, nested structs, pointers (nil kept) and any
// json.Marshaler or encoding.TextMarshaler with its unmarshaler. Fields of
// type any carry free-form JSON data: nil, bools, strings, numbers,
// json.Number, json.RawMessage, and slices and string-keyed maps of those.
// Validate (so every append) refuses anything else in them, naming the
// attribute and the path inside it: a time.Time or another marshaler
// (stored as its string), a struct (it would come back as a
// map[string]any), a []byte (a base64 string), a map with other keys; give
// such a value a typed field. They are decoded as encoding/json decodes
// into an any: numbers come back as float64, which holds integers exactly
// only up to 2^53 (9,007,199,254,740,992), so a larger one (a 64-bit id, a
// count of nanoseconds) comes back rounded, without an error. This is a
// choice, kept so that free-form values compare as plain Go numbers: give
// such a field its Go type (int64, uint64: every digit kept), or declare
// it json.Number or json.RawMessage to keep the digits as written.
// Message metadata (core.Message.Metadata) decodes the same way.
// Upcasters, which see the raw object, get numbers as json.Number.
// url.URL has no string form in encoding/json; use URL. Decode returns the
// struct value, not a pointer, and ignores attributes the struct no longer
// declares.
//
// # Keys
//
// Every top-level scalar attribute (string, bool, number, time.Time,
// TextMarshaler, or a named type of those), pointer to a scalar, and slice
// or array of scalars is indexed under its JSON name with a canonical
// value (see Canonical): strings as they are, numbers in decimal, times in
// UTC as "2006-01-02T15:04:05.000000Z". A nil pointer yields nothing; a
// slice one pair per distinct element; a zero value is indexed ("" and 0
// included) unless the field is tagged omitempty or omitzero (zero as
// the type's IsZero method says, if it has one: Zeroer). Nested
// structs, maps, interfaces and byte slices are not indexed; neither is a
// field tagged `sourced:"noindex"` (Field.NoIndex). A list of structs
// tagged `sourced:"index=product_id"` indexes the product_id of each of
// its elements under product_id (Field.Nested), so a message is found by a
// boundary it carries inside a list: one level deep, a scalar attribute of
// the element, at most MaxNestedKeys elements (Validate refuses longer
// lists, whatever the element's attribute; Keys never cuts a list
// short), a name that is not also a top-level attribute. A message is
// indexed under at most MaxKeyPairs values in all (each scalar attribute
// counts one, each indexed list its length): Validate refuses more, from
// the lists' lengths alone, before a store writes anything.
//
// Every store indexes the same values: an indexed string (or a
// TextMarshaler's text, each element of a list included) is at most
// MaxIndexedValueBytes (1,024) bytes long, holds no NUL byte and is valid
// UTF-8. Validate refuses any other, naming the attribute, before a store
// writes anything, and CheckIndexedValue refuses it in the conditions and
// partitions of reads (both as ErrInvalid). PostgreSQL cannot index a longer
// value (its index entries stop at about 2.7 KB) nor store a NUL in text,
// and encoding/json would store invalid UTF-8 with U+FFFD in place of the
// invalid bytes, so the message would be indexed under a value it is not
// stored with. An attribute that is not indexed (sourced:"noindex") takes
// text of any length, NUL included. Attribute names starting with "__"
// are reserved for the store: the messages of a type that a delete-on-ack
// queue (an id-partitioned consumer group) handles are indexed under their
// id as "__id" as well as under their payload.
//
// Type.Keys reads the compiled field offsets, with no reflection walk: for
// a payload of a few attributes it allocates the result slice and one
// string holding every non-string value, and nothing else.
//
//	keys := typ.Keys(payload, nil)
//	// [{course_id c1} {name Algebra} {seats 30} {starts_on 2026-01-02T09:00:00.000000Z} {tags maths} ...]
//
// # Dates, decimals and other value types
//
// Date is a civil date stored and indexed as "2026-01-02"; Decimal is an
// exact decimal number stored and indexed as its digits, "19.99", with its
// scale kept (keep money out of float64, which stores 0.1 + 0.2 as
// 0.30000000000000004). Both are plain attribute types:
//
//	type InvoiceIssued struct {
//		Invoice string        `json:"invoice"`
//		Due     codec.Date    `json:"due"`
//		Amount  codec.Decimal `json:"amount"`
//	}
//
// Any other value type joins the same way: implement
// encoding.TextMarshaler and encoding.TextUnmarshaler (on the pointer),
// and the value is stored as a JSON string of its text and indexed under
// that text (Canonical returns it too); make the text sort as the values
// do if conditions or readers compare them. A type that needs another JSON
// form implements json.Marshaler and json.Unmarshaler instead; it is
// stored as it marshals, but indexed only if it is also a TextMarshaler.
// Register refuses a marshaler without its unmarshaler. UUIDs
// (github.com/google/uuid) and net/netip addresses are TextMarshalers
// already; for url.URL use URL.
//
// # Validation
//
// Validate checks `sourced:"required"` attributes (not the zero value) and
// runs the payload's Validate method (value or pointer receiver) when it
// implements Validator. FromMap builds a payload from raw attributes (a
// decoded JSON request body) and reports every problem at once: unknown
// attributes, values of the wrong type, missing required attributes and
// Validate's own findings, in one *ValidationError that lists each field
// and matches errors.Is(err, ErrInvalid).
//
// # Upcasting
//
// When a payload's shape changes, bump its Version and register an
// upcaster from each older version to the next. Stored payloads keep the
// version they were written at; Decode runs the chain on the raw JSON
// object, then decodes the result:
//
//	codec.MustRegister[CourseCreated](reg, "courses.created",
//		codec.Version(2),
//		codec.Upcast(1, func(old map[string]any) (map[string]any, error) {
//			old["name"] = old["title"] // v1 called it "title"
//			delete(old, "title")
//			return old, nil
//		}))
//
// Decoding the current version costs one encoding/json Unmarshal into the
// struct; only older versions pay for the map round trip.
package codec
