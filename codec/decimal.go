package codec

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"strconv"
)

// MaxDecimalScale is the most digits a Decimal keeps after the point.
const MaxDecimalScale = 18

// ErrDecimalRange is wrapped by the errors of Decimal operations whose
// exact result does not fit a Decimal (more than 18 significant digits, or
// more than MaxDecimalScale after the point).
var ErrDecimalRange = errors.New("codec: decimal out of range")

// Decimal is an exact decimal number, for money and other quantities a
// float64 would round (0.1 + 0.2 is 0.3 here). It is stored as a JSON
// string of its digits ("19.99") and indexed under the same text, so the
// value read back, and the key a condition names, are exactly the ones
// written; its zero value is 0.
//
// A Decimal keeps its scale, the number of digits after the point: "19.90"
// stays "19.90" (scale 2), which is not the key "19.9" is indexed under,
// although the two are equal numbers (Cmp says 0, == says they differ).
// Keep one scale per attribute (two digits for most currencies; see
// Rescale) so that equal amounts have equal keys.
//
// It is a fixed-point number: a 64-bit integer of units of 10^-scale, with
// a scale from 0 to MaxDecimalScale, so it holds up to 18 significant
// digits (±9,223,372,036,854,775,807 units). Arithmetic is exact or
// returns an error wrapping ErrDecimalRange; nothing rounds except Round.
// When reading JSON it accepts a number as well as a string, taking the
// number's digits as they are written (19.99 stays 19.99).
type Decimal struct {
	units int64 // the value times 10^scale; never math.MinInt64
	scale uint8
}

// pow10 holds 10^0 to 10^19.
var pow10 = func() (p [20]uint64) {
	p[0] = 1
	for i := 1; i < len(p); i++ {
		p[i] = p[i-1] * 10
	}
	return p
}()

// NewDecimal returns units × 10^-scale: NewDecimal(1999, 2) is 19.99. The
// scale must be from 0 to MaxDecimalScale and units above math.MinInt64.
func NewDecimal(units int64, scale int) (Decimal, error) {
	if scale < 0 || scale > MaxDecimalScale {
		return Decimal{}, fmt.Errorf("codec: decimal scale %d: want 0 to %d: %w", scale, MaxDecimalScale, ErrDecimalRange)
	}
	if units == math.MinInt64 {
		return Decimal{}, fmt.Errorf("codec: decimal units %d: %w", units, ErrDecimalRange)
	}
	return Decimal{units: units, scale: uint8(scale)}, nil
}

// ParseDecimal parses a decimal number written as digits with an optional
// sign, an optional point followed by at least one digit, and an optional
// exponent, as JSON writes numbers ("19.99", "-0.5", "42", "1e-07" is
// 0.0000001). The scale is the number of digits after the point (less the
// exponent): "19.90" has scale 2. Spaces, and values outside the Decimal's
// range, are refused.
func ParseDecimal(s string) (Decimal, error) {
	d, err := parseDecimal([]byte(s))
	if err != nil {
		return Decimal{}, fmt.Errorf("codec: decimal %q: %w", s, err)
	}
	return d, nil
}

// MustDecimal is ParseDecimal for constants known to be valid; it panics
// on an invalid one.
func MustDecimal(s string) Decimal {
	d, err := ParseDecimal(s)
	if err != nil {
		panic(err)
	}
	return d
}

func parseDecimal(b []byte) (Decimal, error) {
	exp := 0
	if i := bytes.IndexAny(b, "eE"); i >= 0 {
		e, err := strconv.Atoi(string(b[i+1:]))
		if err != nil || e < -2*MaxDecimalScale || e > 2*MaxDecimalScale {
			return Decimal{}, fmt.Errorf("exponent %q: want an integer from %d to %d", b[i+1:], -2*MaxDecimalScale, 2*MaxDecimalScale)
		}
		b, exp = b[:i], e
	}
	neg := false
	if len(b) > 0 && (b[0] == '-' || b[0] == '+') {
		neg = b[0] == '-'
		b = b[1:]
	}
	whole, frac, dot := b, []byte(nil), false
	if i := bytes.IndexByte(b, '.'); i >= 0 {
		whole, frac, dot = b[:i], b[i+1:], true
	}
	if len(whole) == 0 || dot && len(frac) == 0 {
		return Decimal{}, errors.New("want digits with an optional point and fraction digits (ex. 19.99)")
	}
	scale := len(frac) - exp
	if scale > MaxDecimalScale {
		return Decimal{}, fmt.Errorf("%d digits after the point, at most %d are kept: %w", scale, MaxDecimalScale, ErrDecimalRange)
	}
	var u uint64
	for _, part := range [][]byte{whole, frac} {
		for _, c := range part {
			if c < '0' || c > '9' {
				return Decimal{}, fmt.Errorf("unexpected %q: want digits with an optional point and fraction digits (ex. 19.99)", c)
			}
			hi, lo := bits.Mul64(u, 10)
			lo, carry := bits.Add64(lo, uint64(c-'0'), 0)
			if hi != 0 || carry != 0 || lo > math.MaxInt64 {
				return Decimal{}, fmt.Errorf("more than 18 significant digits: %w", ErrDecimalRange)
			}
			u = lo
		}
	}
	d := Decimal{units: int64(u)}
	if neg {
		d.units = -d.units
	}
	if scale >= 0 {
		d.scale = uint8(scale)
		return d, nil
	}
	// A positive exponent beyond the fraction: whole units.
	if d.units == 0 {
		return Decimal{}, nil
	}
	if -scale < len(pow10) {
		if u, ok := (Decimal{units: d.units}).scaled(uint8(-scale)); ok {
			return Decimal{units: u}, nil
		}
	}
	return Decimal{}, fmt.Errorf("more than 18 significant digits: %w", ErrDecimalRange)
}

// Units returns the decimal as an integer of units and a scale: 19.99 is
// (1999, 2).
func (d Decimal) Units() (units int64, scale int) { return d.units, int(d.scale) }

// Scale returns the number of digits after the point.
func (d Decimal) Scale() int { return int(d.scale) }

// Sign returns -1, 0 or +1.
func (d Decimal) Sign() int { return cmp.Compare(d.units, 0) }

// IsZero reports whether d is zero, at any scale.
func (d Decimal) IsZero() bool { return d.units == 0 }

var _ Zeroer = Decimal{}

// String returns the digits of d with its scale kept ("19.90", "-0.05").
func (d Decimal) String() string { return string(d.appendText(nil)) }

func (d Decimal) appendText(b []byte) []byte {
	u := uint64(d.units)
	if d.units < 0 {
		b = append(b, '-')
		u = uint64(-d.units)
	}
	if d.scale == 0 {
		return strconv.AppendUint(b, u, 10)
	}
	p := pow10[d.scale]
	b = strconv.AppendUint(b, u/p, 10)
	b = append(b, '.')
	frac := strconv.AppendUint(nil, u%p, 10)
	for range int(d.scale) - len(frac) {
		b = append(b, '0')
	}
	return append(b, frac...)
}

// MarshalText returns String's digits: what is stored and indexed.
func (d Decimal) MarshalText() ([]byte, error) { return d.appendText(nil), nil }

// UnmarshalText parses the digits MarshalText writes (see ParseDecimal).
func (d *Decimal) UnmarshalText(text []byte) error {
	p, err := parseDecimal(text)
	if err != nil {
		return fmt.Errorf("codec: decimal %q: %w", text, err)
	}
	*d = p
	return nil
}

// UnmarshalJSON reads a JSON string of digits, or a JSON number taken
// digit for digit (so that a request body may send 19.99 unquoted without
// going through a float). null leaves d as it is.
func (d *Decimal) UnmarshalJSON(data []byte) error {
	switch {
	case string(data) == "null":
		return nil
	case len(data) >= 2 && data[0] == '"' && data[len(data)-1] == '"':
		s, err := strconv.Unquote(string(data))
		if err != nil {
			return fmt.Errorf("codec: decimal %s: %w", data, err)
		}
		return d.UnmarshalText([]byte(s))
	}
	return d.UnmarshalText(data)
}

// scaled returns d's units at scale s (>= d.scale), or false on overflow.
func (d Decimal) scaled(s uint8) (int64, bool) {
	if s == d.scale {
		return d.units, true
	}
	neg, u := d.units < 0, uint64(d.units)
	if neg {
		u = uint64(-d.units)
	}
	hi, lo := bits.Mul64(u, pow10[s-d.scale])
	if hi != 0 || lo > math.MaxInt64 {
		return 0, false
	}
	if neg {
		return -int64(lo), true
	}
	return int64(lo), true
}

// Cmp returns -1, 0 or +1 as d is less than, equal to or greater than e,
// as numbers (19.9 and 19.90 are equal).
func (d Decimal) Cmp(e Decimal) int {
	if c := cmp.Compare(d.Sign(), e.Sign()); c != 0 || d.units == 0 {
		return c
	}
	s := max(d.scale, e.scale)
	mag := func(x Decimal) (uint64, uint64) {
		u := uint64(x.units)
		if x.units < 0 {
			u = uint64(-x.units)
		}
		return bits.Mul64(u, pow10[s-x.scale])
	}
	dh, dl := mag(d)
	eh, el := mag(e)
	c := cmp.Compare(dh, eh)
	if c == 0 {
		c = cmp.Compare(dl, el)
	}
	return c * d.Sign()
}

// Equal reports whether d and e are equal numbers (19.9 equals 19.90).
func (d Decimal) Equal(e Decimal) bool { return d.Cmp(e) == 0 }

// Neg returns -d.
func (d Decimal) Neg() Decimal { return Decimal{units: -d.units, scale: d.scale} }

// Add returns d + e at the larger of their scales.
func (d Decimal) Add(e Decimal) (Decimal, error) {
	s := max(d.scale, e.scale)
	a, ok1 := d.scaled(s)
	b, ok2 := e.scaled(s)
	sum, overflow := a+b, false
	if (b > 0 && sum < a) || (b < 0 && sum > a) || sum == math.MinInt64 {
		overflow = true
	}
	if !ok1 || !ok2 || overflow {
		return Decimal{}, fmt.Errorf("codec: %s + %s: %w", d, e, ErrDecimalRange)
	}
	return Decimal{units: sum, scale: s}, nil
}

// Sub returns d - e at the larger of their scales.
func (d Decimal) Sub(e Decimal) (Decimal, error) { return d.Add(e.Neg()) }

// Mul returns d × e at the sum of their scales (19.99 × 3 is 59.97, 19.99
// × 0.2 is 3.998: see Round).
func (d Decimal) Mul(e Decimal) (Decimal, error) {
	fail := func() (Decimal, error) { return Decimal{}, fmt.Errorf("codec: %s × %s: %w", d, e, ErrDecimalRange) }
	s := int(d.scale) + int(e.scale)
	if s > MaxDecimalScale {
		return fail()
	}
	a, b := uint64(d.units), uint64(e.units)
	if d.units < 0 {
		a = uint64(-d.units)
	}
	if e.units < 0 {
		b = uint64(-e.units)
	}
	hi, lo := bits.Mul64(a, b)
	if hi != 0 || lo > math.MaxInt64 {
		return fail()
	}
	units := int64(lo)
	if d.Sign()*e.Sign() < 0 {
		units = -units
	}
	return Decimal{units: units, scale: uint8(s)}, nil
}

// Rescale returns d with scale digits after the point, exactly: adding
// zeros (19.9 to 19.90), or dropping zeros (19.90 to 19.9). Dropping a
// digit that is not zero is an error (use Round).
func (d Decimal) Rescale(scale int) (Decimal, error) {
	if scale < 0 || scale > MaxDecimalScale {
		return Decimal{}, fmt.Errorf("codec: rescale %s to %d digits: want 0 to %d: %w", d, scale, MaxDecimalScale, ErrDecimalRange)
	}
	s := uint8(scale)
	if s >= d.scale {
		u, ok := d.scaled(s)
		if !ok {
			return Decimal{}, fmt.Errorf("codec: rescale %s to %d digits: %w", d, scale, ErrDecimalRange)
		}
		return Decimal{units: u, scale: s}, nil
	}
	p := int64(pow10[d.scale-s])
	if d.units%p != 0 {
		return Decimal{}, fmt.Errorf("codec: rescale %s to %d digits would drop digits: use Round", d, scale)
	}
	return Decimal{units: d.units / p, scale: s}, nil
}

// Round returns d rounded to scale digits after the point, halves to the
// even digit (banker's rounding: 0.125 is 0.12, 0.135 is 0.14). A scale at
// or above d's returns d unchanged.
func (d Decimal) Round(scale int) Decimal {
	if scale < 0 {
		scale = 0
	}
	if scale >= int(d.scale) {
		return d
	}
	p := int64(pow10[int(d.scale)-scale])
	q, r := d.units/p, d.units%p
	if r < 0 {
		r = -r
	}
	half := p / 2
	if r > half || r == half && q%2 != 0 {
		if d.units < 0 {
			q--
		} else {
			q++
		}
	}
	return Decimal{units: q, scale: uint8(scale)}
}
