package codec

import (
	"encoding"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
	"unsafe"
)

// KeyPair is one (attribute name, canonical value) pair a message is
// indexed under.
type KeyPair struct{ Name, Value string }

// String returns "name=value".
func (k KeyPair) String() string { return k.Name + "=" + k.Value }

// Compare orders key pairs by Name, then Value.
func (k KeyPair) Compare(o KeyPair) int {
	if c := strings.Compare(k.Name, o.Name); c != 0 {
		return c
	}
	return strings.Compare(k.Value, o.Value)
}

func compareKeyPairs(a, b KeyPair) int { return a.Compare(b) }

// scalarKind is how a scalar value is read and written as a key value.
type scalarKind uint8

const (
	kNone scalarKind = iota
	kString
	kBool
	kInt
	kInt8
	kInt16
	kInt32
	kInt64
	kUint
	kUint8
	kUint16
	kUint32
	kUint64
	kUintptr
	kFloat32
	kFloat64
	kTime // time.Time: fixed-width UTC, microseconds
	kText // encoding.TextMarshaler (value or pointer receiver)
)

// scalarKindOf classifies a non-pointer type: time.Time, a TextMarshaler,
// or a type whose underlying kind is a string, a bool or a number.
func scalarKindOf(t reflect.Type) scalarKind {
	switch t.Kind() {
	case reflect.Interface, reflect.Pointer:
		return kNone
	}
	if t == timeType {
		return kTime
	}
	if t.Implements(textMarshalerType) || reflect.PointerTo(t).Implements(textMarshalerType) {
		return kText
	}
	switch t.Kind() {
	case reflect.String:
		return kString
	case reflect.Bool:
		return kBool
	case reflect.Int:
		return kInt
	case reflect.Int8:
		return kInt8
	case reflect.Int16:
		return kInt16
	case reflect.Int32:
		return kInt32
	case reflect.Int64:
		return kInt64
	case reflect.Uint:
		return kUint
	case reflect.Uint8:
		return kUint8
	case reflect.Uint16:
		return kUint16
	case reflect.Uint32:
		return kUint32
	case reflect.Uint64:
		return kUint64
	case reflect.Uintptr:
		return kUintptr
	case reflect.Float32:
		return kFloat32
	case reflect.Float64:
		return kFloat64
	}
	return kNone
}

// keyField is an indexed attribute, compiled: where its value sits in the
// payload's memory and how to write it.
type keyField struct {
	name      string
	off       uintptr   // offset from the payload start (to the first embedded pointer, if any)
	via       []uintptr // after each embedded pointer on the path: the offset from its target
	ptrs      int       // pointer indirections before the value (*string: 1)
	kind      scalarKind
	typ       reflect.Type // the scalar (element) type
	omitEmpty bool

	multi    bool
	ctype    reflect.Type // the slice or array type
	arrayLen int          // array length, or -1 for a slice
	elemSize uintptr
	elemPtrs int // pointer indirections of each element ([]*string: 1)

	// A nested key (sourced:"index=name") reads, in each element (a
	// struct), the scalar at subOff, after subPtrs pointer indirections.
	nested  bool
	subOff  uintptr
	subPtrs int
}

// MaxNestedKeys is how many elements of a list a nested index
// (sourced:"index=name") reads: a longer list fails validation, as an
// index of unbounded size would make every append of it slow. Keys never
// cuts such a list short: an index that silently left out element 1,001
// would hide the message from the reads and guards that look for it.
const MaxNestedKeys = 1000

// MaxKeyPairs is how many values the indexed attributes of one message
// may hold in all (each scalar attribute counts one, each indexed list
// its length, duplicates included): Validate refuses a payload over it
// with a *ValidationError, before a store writes anything. Every key pair
// is a row of the store's index written under its write lock, so an
// unbounded list would let one request hold every writer up for seconds.
const MaxKeyPairs = 2000

// compileNestedKey compiles the index of attribute sub of each element of
// the list attribute f (a slice or array of structs, or of pointers to
// structs), declared with the struct tag `sourced:"index=sub"`. sub must be
// a scalar attribute (or a pointer to one) of the element, reached without
// an embedded pointer.
func compileNestedKey(root reflect.Type, f Field, sub string) (keyField, Field, error) {
	kf := keyField{name: sub, arrayLen: -1, multi: true, nested: true}
	kf.off, kf.via = splitOffsets(root, f.Index)
	ft := f.GoType
	for ft.Kind() == reflect.Pointer {
		ft = ft.Elem()
		kf.ptrs++
	}
	if ft.Kind() != reflect.Slice && ft.Kind() != reflect.Array {
		return kf, Field{}, fmt.Errorf("only a list (a slice or array of structs) can index the attributes of its elements, not a %v", f.GoType)
	}
	et := ft.Elem()
	for et.Kind() == reflect.Pointer {
		et = et.Elem()
		kf.elemPtrs++
	}
	if et.Kind() != reflect.Struct {
		return kf, Field{}, fmt.Errorf("the elements are %v, not structs", et)
	}
	var found *jsonField
	for _, jf := range jsonFields(et) {
		if jf.name == sub {
			found = &jf
			break
		}
	}
	if found == nil {
		return kf, Field{}, fmt.Errorf("the elements (%v) have no attribute %q", et, sub)
	}
	st := et
	for k, i := range found.index {
		sf := st.Field(i)
		kf.subOff += sf.Offset
		if k < len(found.index)-1 {
			if sf.Type.Kind() == reflect.Pointer {
				return kf, Field{}, fmt.Errorf("%q is reached through an embedded pointer, which a nested index does not follow", sub)
			}
			st = sf.Type
		}
	}
	vt := found.typ
	for vt.Kind() == reflect.Pointer {
		vt = vt.Elem()
		kf.subPtrs++
	}
	k := scalarKindOf(vt)
	if k == kNone {
		return kf, Field{}, fmt.Errorf("the elements' %q is a %v: only scalars (strings, numbers, booleans, times, text values) are indexed", sub, found.typ)
	}
	kf.kind, kf.typ, kf.ctype, kf.elemSize = k, vt, ft, ft.Elem().Size()
	if ft.Kind() == reflect.Array {
		kf.arrayLen = ft.Len()
	}
	nf := Field{Name: sub, GoType: reflect.SliceOf(found.typ), Indexed: true, Multi: true, Nested: f.Name}
	return kf, nf, nil
}

// compileKey compiles f into a keyField, or reports it is not indexed.
func compileKey(root reflect.Type, f Field) (keyField, bool) {
	kf := keyField{name: f.Name, omitEmpty: f.OmitEmpty, arrayLen: -1}
	kf.off, kf.via = splitOffsets(root, f.Index)

	ft := f.GoType
	for ft.Kind() == reflect.Pointer {
		ft = ft.Elem()
		kf.ptrs++
	}
	if k := scalarKindOf(ft); k != kNone {
		kf.kind, kf.typ = k, ft
		return kf, true
	}
	if ft.Kind() != reflect.Slice && ft.Kind() != reflect.Array {
		return kf, false
	}
	et := ft.Elem()
	for et.Kind() == reflect.Pointer {
		et = et.Elem()
		kf.elemPtrs++
	}
	k := scalarKindOf(et)
	if k == kNone || (k != kText && et.Kind() == reflect.Uint8 && kf.elemPtrs == 0) {
		// Not scalars, or bytes (base64 or binary data, not a list of values).
		return kf, false
	}
	kf.kind, kf.typ, kf.multi, kf.ctype, kf.elemSize = k, et, true, ft, ft.Elem().Size()
	if ft.Kind() == reflect.Array {
		kf.arrayLen = ft.Len()
	}
	return kf, true
}

// splitOffsets returns the offset of the field at index from the payload
// start, split at embedded pointers: the first segment, then one offset per
// pointer to follow.
func splitOffsets(root reflect.Type, index []int) (uintptr, []uintptr) {
	var segs []uintptr
	t, off := root, uintptr(0)
	for k, i := range index {
		sf := t.Field(i)
		off += sf.Offset
		if k == len(index)-1 {
			break
		}
		t = sf.Type
		if t.Kind() == reflect.Pointer {
			segs = append(segs, off)
			off, t = 0, t.Elem()
		}
	}
	segs = append(segs, off)
	return segs[0], segs[1:]
}

func sortKeyFields(kfs []keyField) {
	slices.SortFunc(kfs, func(a, b keyField) int { return strings.Compare(a.name, b.name) })
}

// locate returns a pointer to the field's value (after its own pointers),
// or nil when a pointer on the way is nil.
func (kf *keyField) locate(base unsafe.Pointer) unsafe.Pointer {
	p := unsafe.Add(base, kf.off)
	for _, off := range kf.via {
		p = *(*unsafe.Pointer)(p)
		if p == nil {
			return nil
		}
		p = unsafe.Add(p, off)
	}
	for range kf.ptrs {
		p = *(*unsafe.Pointer)(p)
		if p == nil {
			return nil
		}
	}
	return p
}

// elems returns the first element and the length of the slice or array at p.
func (kf *keyField) elems(p unsafe.Pointer) (unsafe.Pointer, int) {
	if kf.arrayLen >= 0 {
		return p, kf.arrayLen
	}
	v := reflect.NewAt(kf.ctype, p).Elem()
	return v.UnsafePointer(), v.Len()
}

// elem returns a pointer to element j (after its own pointers), or nil.
func (kf *keyField) elem(data unsafe.Pointer, j int) unsafe.Pointer {
	p := unsafe.Add(data, uintptr(j)*kf.elemSize)
	for range kf.elemPtrs {
		p = *(*unsafe.Pointer)(p)
		if p == nil {
			return nil
		}
	}
	return p
}

// sub returns a pointer to a nested key's scalar in the element at ep
// (after its own pointers), or nil.
func (kf *keyField) sub(ep unsafe.Pointer) unsafe.Pointer {
	p := unsafe.Add(ep, kf.subOff)
	for range kf.subPtrs {
		p = *(*unsafe.Pointer)(p)
		if p == nil {
			return nil
		}
	}
	return p
}

// span locates a canonical value in the shared byte buffer of appendKeys.
type span struct{ at, lo, hi int32 }

// Keys appends to dst the key pairs payload is indexed under, and returns
// the extended slice (pass dst[:0] to reuse a slice, nil to allocate one).
// payload must be a value of t.GoType or a non-nil pointer to one;
// anything else panics, like a failed type assertion. A nil pointer has no
// key pairs.
//
// Every Indexed attribute contributes, under its JSON name:
//   - a scalar: one pair with its canonical value (see Canonical); a zero
//     value is indexed too ("" and 0 included) unless the field is tagged
//     omitempty or omitzero (zero as the type's IsZero says: see Zeroer);
//   - a pointer to a scalar: nothing when nil, else the pointed-to value;
//   - a slice or array of scalars: one pair per distinct element;
//   - a list of structs tagged `sourced:"index=name"`: one pair under name
//     per distinct value of each element's attribute name (see below).
//
// Nested structs, maps and interfaces are not indexed, except through an
// index tag on a list: the field Items []Item tagged sourced:"index=product_id"
// indexes every items[].product_id under the attribute product_id, so a
// condition or a decision's query can find the message by a value it
// carries inside a list. Limits: the list is a slice or array of structs
// (or of pointers to structs), one level deep; the attribute is a scalar
// of the element (or a pointer to one; nil pointers and nil elements yield
// nothing), reached without an embedded pointer; its name may not also be
// a top-level attribute; a list longer than MaxNestedKeys fails
// validation (Keys still indexes every element, and Registry.Keys reports
// the error). Several index options may be given (index=a,index=b). The appended pairs
// are sorted by (Name, Value), without duplicates. String values share
// memory with the payload's strings; all other values share one string.
//
// A TextMarshaler that fails yields no key pair (Registry.Keys reports the
// error; encoding the payload would fail the same way).
func (t *Type) Keys(payload any, dst []KeyPair) []KeyPair {
	base, ok := t.pointer(payload)
	if !ok {
		panic(fmt.Sprintf("codec: %s.Keys called with a %T, not a %v", t.Name, payload, t.GoType))
	}
	if base == nil {
		return dst
	}
	dst, _ = t.appendKeys(base, dst)
	return dst
}

// pointer returns a pointer to the payload's struct value, without copying
// it when it can. ok is false when payload is not a t.GoType or *t.GoType.
func (t *Type) pointer(payload any) (p unsafe.Pointer, ok bool) {
	switch reflect.TypeOf(payload) {
	case t.ptrType:
		return reflect.ValueOf(payload).UnsafePointer(), true
	case t.GoType:
		if t.indirect {
			// An interface holding a value wider than a pointer holds a
			// pointer to a copy of it: read that copy in place (only read).
			return (*[2]unsafe.Pointer)(unsafe.Pointer(&payload))[1], true
		}
		v := reflect.New(t.GoType)
		v.Elem().Set(reflect.ValueOf(payload))
		return v.UnsafePointer(), true
	}
	return nil, false
}

func (t *Type) appendKeys(base unsafe.Pointer, dst []KeyPair) ([]KeyPair, error) {
	start := len(dst)
	need := t.keyCount
	if t.hasMulti {
		for i := range t.keys {
			if kf := &t.keys[i]; kf.multi {
				if p := kf.locate(base); p != nil {
					_, n := kf.elems(p)
					need += n
				}
			}
		}
	}
	dst = slices.Grow(dst, need)

	// Non-string values go to one buffer, converted to one string at the end.
	var stack [128]byte
	buf := stack[:0]
	var spanStack [16]span
	spans := spanStack[:0]
	var firstErr error

	for i := range t.keys {
		kf := &t.keys[i]
		p := kf.locate(base)
		if p == nil {
			continue
		}
		if !kf.multi {
			if kf.omitEmpty && kf.ptrs == 0 && isZeroScalar(kf.kind, kf.typ, p) {
				continue
			}
			dst, buf, spans, firstErr = t.appendKey(kf, p, dst, buf, spans, firstErr)
			continue
		}
		data, n := kf.elems(p)
		if kf.nested && n > MaxNestedKeys {
			// Reported, never cut short (Validate refuses such a payload).
			firstErr = keyErr(firstErr, t, kf.name, fmt.Errorf("the list holds %d elements: a nested index reads at most %d (codec.MaxNestedKeys)", n, MaxNestedKeys))
		}
		for j := range n {
			ep := kf.elem(data, j)
			if ep != nil && kf.nested {
				ep = kf.sub(ep)
			}
			if ep != nil {
				dst, buf, spans, firstErr = t.appendKey(kf, ep, dst, buf, spans, firstErr)
			}
		}
	}
	if len(spans) > 0 {
		s := string(buf)
		for _, sp := range spans {
			dst[sp.at].Value = s[sp.lo:sp.hi]
		}
	}
	if t.hasMulti {
		// Fields are sorted by name: only multi values need sorting.
		tail := dst[start:]
		slices.SortFunc(tail, compareKeyPairs)
		dst = dst[:start+len(slices.Compact(tail))]
	}
	return dst, firstErr
}

// appendKey appends the key pair of the scalar at p: a string value
// directly, any other value's canonical text to buf, recorded in spans so
// that appendKeys fills it in from one string at the end.
func (t *Type) appendKey(kf *keyField, p unsafe.Pointer, dst []KeyPair, buf []byte, spans []span, firstErr error) ([]KeyPair, []byte, []span, error) {
	if kf.kind == kString {
		return append(dst, KeyPair{Name: kf.name, Value: *(*string)(p)}), buf, spans, firstErr
	}
	lo := len(buf)
	buf, err := appendScalar(buf, kf.kind, kf.typ, p)
	if err != nil {
		return dst, buf[:lo], spans, keyErr(firstErr, t, kf.name, err)
	}
	spans = append(spans, span{int32(len(dst)), int32(lo), int32(len(buf))})
	return append(dst, KeyPair{Name: kf.name}), buf, spans, firstErr
}

func keyErr(first error, t *Type, field string, err error) error {
	if first != nil {
		return first
	}
	return fmt.Errorf("codec: keys of %q: attribute %q: %w", t.Name, field, err)
}

// Zeroer is implemented by scalar attribute types that say when a value
// is zero (Date, Decimal, time.Time; encoding/json's omitzero reads the
// same method). Keys calls it, with a value or a pointer receiver, on an
// attribute tagged omitempty or omitzero: a value whose IsZero reports
// true yields no key pair (a Decimal of 0.00, whose scale is not zero,
// included). A type without it is zero when it is its Go zero value.
type Zeroer interface{ IsZero() bool }

// isZeroScalar reports whether the scalar at p is its type's zero value
// (see Zeroer).
func isZeroScalar(k scalarKind, typ reflect.Type, p unsafe.Pointer) bool {
	switch k {
	case kString:
		return *(*string)(p) == ""
	case kBool:
		return !*(*bool)(p)
	case kInt:
		return *(*int)(p) == 0
	case kInt8:
		return *(*int8)(p) == 0
	case kInt16:
		return *(*int16)(p) == 0
	case kInt32:
		return *(*int32)(p) == 0
	case kInt64:
		return *(*int64)(p) == 0
	case kUint:
		return *(*uint)(p) == 0
	case kUint8:
		return *(*uint8)(p) == 0
	case kUint16:
		return *(*uint16)(p) == 0
	case kUint32:
		return *(*uint32)(p) == 0
	case kUint64:
		return *(*uint64)(p) == 0
	case kUintptr:
		return *(*uintptr)(p) == 0
	case kFloat32:
		return *(*float32)(p) == 0
	case kFloat64:
		return *(*float64)(p) == 0
	case kTime:
		return (*time.Time)(p).IsZero()
	}
	v := reflect.NewAt(typ, p)
	if z, ok := v.Interface().(Zeroer); ok {
		return z.IsZero()
	}
	return v.Elem().IsZero()
}

// appendScalar appends the canonical text of the scalar at p to buf.
func appendScalar(buf []byte, k scalarKind, typ reflect.Type, p unsafe.Pointer) ([]byte, error) {
	switch k {
	case kString:
		return append(buf, *(*string)(p)...), nil
	case kBool:
		return strconv.AppendBool(buf, *(*bool)(p)), nil
	case kInt:
		return strconv.AppendInt(buf, int64(*(*int)(p)), 10), nil
	case kInt8:
		return strconv.AppendInt(buf, int64(*(*int8)(p)), 10), nil
	case kInt16:
		return strconv.AppendInt(buf, int64(*(*int16)(p)), 10), nil
	case kInt32:
		return strconv.AppendInt(buf, int64(*(*int32)(p)), 10), nil
	case kInt64:
		return strconv.AppendInt(buf, *(*int64)(p), 10), nil
	case kUint:
		return strconv.AppendUint(buf, uint64(*(*uint)(p)), 10), nil
	case kUint8:
		return strconv.AppendUint(buf, uint64(*(*uint8)(p)), 10), nil
	case kUint16:
		return strconv.AppendUint(buf, uint64(*(*uint16)(p)), 10), nil
	case kUint32:
		return strconv.AppendUint(buf, uint64(*(*uint32)(p)), 10), nil
	case kUint64:
		return strconv.AppendUint(buf, *(*uint64)(p), 10), nil
	case kUintptr:
		return strconv.AppendUint(buf, uint64(*(*uintptr)(p)), 10), nil
	case kFloat32:
		return strconv.AppendFloat(buf, float64(*(*float32)(p)), 'g', -1, 32), nil
	case kFloat64:
		return strconv.AppendFloat(buf, *(*float64)(p), 'g', -1, 64), nil
	case kTime:
		return appendTime(buf, *(*time.Time)(p)), nil
	case kText:
		// Through a pointer, so pointer-receiver MarshalText methods count too.
		tm := reflect.NewAt(typ, p).Interface().(encoding.TextMarshaler)
		text, err := tm.MarshalText()
		if err != nil {
			return buf, err
		}
		return append(buf, text...), nil
	}
	return buf, fmt.Errorf("codec: %v is not a scalar", typ)
}

// TimeLayout is the layout of time values in key pairs: UTC, fixed width,
// microseconds (nanoseconds below a microsecond are dropped), so that the
// key strings of times sort as the times do.
const TimeLayout = "2006-01-02T15:04:05.000000Z"

// appendTime appends t in TimeLayout, computing the UTC date from Unix
// seconds directly: several times faster than time.Time.Date, Clock and
// AppendFormat.
func appendTime(b []byte, t time.Time) []byte {
	sec := t.Unix()
	days := sec / 86400
	if sec%86400 < 0 {
		days--
	}
	rem := int(sec - days*86400)
	year, month, day := civilFast(days)
	var a [27]byte // 2006-01-02T15:04:05.000000Z
	from := 0
	if year < 0 || year > 9999 {
		// Outside RFC 3339: keep the layout's shape with an unpadded year.
		b = strconv.AppendInt(b, year, 10)
		from = 4
	} else {
		put2(a[0:], int(year)/100)
		put2(a[2:], int(year)%100)
	}
	us := t.Nanosecond() / 1000
	a[4], a[7], a[10], a[13], a[16], a[19], a[26] = '-', '-', 'T', ':', ':', '.', 'Z'
	put2(a[5:], month)
	put2(a[8:], day)
	put2(a[11:], rem/3600)
	put2(a[14:], rem/60%60)
	put2(a[17:], rem%60)
	put2(a[20:], us/10000)
	put2(a[22:], us/100%100)
	put2(a[24:], us%100)
	return append(b, a[from:]...)
}

const digitPairs = "00010203040506070809101112131415161718192021222324252627282930313233343536373839" +
	"40414243444546474849505152535455565758596061626364656667686970717273747576777879" +
	"8081828384858687888990919293949596979899"

// put2 writes v (0..99) as two digits.
func put2(a []byte, v int) {
	a[0], a[1] = digitPairs[2*v], digitPairs[2*v+1]
}

// civilShift moves days so that civilFast works on unsigned numbers for
// every year from -1,468,000 on.
const civilShift = 719468 + 146097*3670

// civilFast is civil by the Neri-Schneider algorithm (Euclidean affine
// functions), about twice as fast; it falls back to civil far in the past.
func civilFast(days int64) (year int64, month, day int) {
	if days < -civilShift {
		return civil(days)
	}
	n1 := 4*uint64(days+civilShift) + 3
	c := n1 / 146097
	n2 := 4*(n1%146097/4) + 3
	p2 := 2939745 * n2
	z := p2 >> 32
	ny := uint32(p2) / 2939745 / 4
	year = int64(100*c + z)
	n3 := 2141*ny + 197913
	month, day = int(n3>>16), int(n3&0xffff)/2141+1
	if ny >= 306 {
		year++
		month -= 12
	}
	return year - 400*3670, month, day
}

// civil returns the proleptic Gregorian date of the day days after
// 1970-01-01.
func civil(days int64) (year int64, month, day int) {
	z := days + 719468
	era := z / 146097
	if z < 0 && z%146097 != 0 {
		era--
	}
	doe := z - era*146097                                  // [0, 146096]
	yoe := (doe - doe/1460 + doe/36524 - doe/146096) / 365 // [0, 399]
	doy := doe - (365*yoe + yoe/4 - yoe/100)               // [0, 365]
	mp := (5*doy + 2) / 153                                // [0, 11], from March
	day = int(doy - (153*mp+2)/5 + 1)
	month = int(mp + 3)
	if month > 12 {
		month -= 12
	}
	year = yoe + era*400
	if month <= 2 {
		year++
	}
	return year, month, day
}

// Canonical returns the canonical key string of a scalar value, the string
// Keys produces for an attribute holding v, so that callers can give
// partition and condition values as native Go values:
//
//   - strings as they are; bool "true"/"false";
//   - integers in decimal; floats by strconv 'g' with the shortest
//     precision that round-trips (float32 at 32 bits);
//   - time.Time in UTC, TimeLayout (fixed width, microseconds);
//   - encoding.TextMarshaler values as their text;
//   - other named types by their underlying string, bool or number;
//   - a non-nil pointer as the value it points to.
//
// Anything else (nil, structs, slices, maps) is an error.
func Canonical(v any) (string, error) {
	switch x := v.(type) {
	case string:
		return x, nil
	case bool:
		return strconv.FormatBool(x), nil
	case int:
		return strconv.Itoa(x), nil
	case int64:
		return strconv.FormatInt(x, 10), nil
	case time.Time:
		return string(appendTime(nil, x)), nil
	case nil:
		return "", errors.New("codec: Canonical(nil): a key value cannot be nil")
	}
	rv := reflect.ValueOf(v)
	for rv.Kind() == reflect.Pointer {
		if rv.IsNil() {
			return "", fmt.Errorf("codec: Canonical: nil %v: a key value cannot be nil", rv.Type())
		}
		rv = rv.Elem()
	}
	k := scalarKindOf(rv.Type())
	if k == kNone {
		return "", fmt.Errorf("codec: Canonical: %v is not a scalar (a string, bool, number, time.Time or encoding.TextMarshaler)", rv.Type())
	}
	if !rv.CanAddr() {
		c := reflect.New(rv.Type()).Elem()
		c.Set(rv)
		rv = c
	}
	b, err := appendScalar(nil, k, rv.Type(), rv.Addr().UnsafePointer())
	if err != nil {
		return "", fmt.Errorf("codec: Canonical(%v): %w", rv.Type(), err)
	}
	return string(b), nil
}
