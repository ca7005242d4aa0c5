package codec

import (
	"cmp"
	"fmt"
	"time"
)

// Date is a civil date: a year, a month and a day, with no time of day and
// no time zone (a birthday, a due date, the day a course starts). It is
// stored, and indexed, as "2026-01-02", so that dates sort as their key
// strings do (for years 0 to 9999); the zero Date is stored as "" and read
// back as the zero Date.
//
// Use a Date rather than a time.Time at midnight, whose value shifts with
// the zone it was made in.
type Date struct {
	Year  int
	Month time.Month
	Day   int
}

// DateOf returns the date of t in t's location.
func DateOf(t time.Time) Date {
	y, m, d := t.Date()
	return Date{Year: y, Month: m, Day: d}
}

// ParseDate parses a date in the form "2026-01-02" (four-digit year,
// two-digit month and day). It refuses a day the month does not have.
func ParseDate(s string) (Date, error) {
	t, err := time.Parse(time.DateOnly, s)
	if err != nil {
		return Date{}, fmt.Errorf("codec: date %q: want YYYY-MM-DD, a day the month has (ex. 2026-01-02)", s)
	}
	return DateOf(t), nil
}

// String returns the date as "2026-01-02" ("" for the zero Date, and the
// fields as they are, each padded, for an invalid one).
func (d Date) String() string {
	if d.IsZero() {
		return ""
	}
	return fmt.Sprintf("%04d-%02d-%02d", d.Year, int(d.Month), d.Day)
}

// IsZero reports whether d is the zero Date (no date).
func (d Date) IsZero() bool { return d == Date{} }

var _ Zeroer = Date{}

// IsValid reports whether d is a real day of the proleptic Gregorian
// calendar, with a year from 0 to 9999.
func (d Date) IsValid() bool {
	if d.Year < 0 || d.Year > 9999 {
		return false
	}
	return DateOf(d.In(time.UTC)) == d
}

// In returns the time at the start of the day d in loc.
func (d Date) In(loc *time.Location) time.Time {
	return time.Date(d.Year, d.Month, d.Day, 0, 0, 0, 0, loc)
}

// AddDays returns the date n days after d (before it when n < 0).
func (d Date) AddDays(n int) Date { return DateOf(d.In(time.UTC).AddDate(0, 0, n)) }

// DaysSince returns the number of days from e to d (negative when d is
// before e).
func (d Date) DaysSince(e Date) int {
	return int(d.In(time.UTC).Sub(e.In(time.UTC)).Hours() / 24)
}

// Compare returns -1, 0 or +1 as d is before, equal to or after e.
func (d Date) Compare(e Date) int {
	switch {
	case d.Year != e.Year:
		return cmp.Compare(d.Year, e.Year)
	case d.Month != e.Month:
		return cmp.Compare(int(d.Month), int(e.Month))
	}
	return cmp.Compare(d.Day, e.Day)
}

// Before reports whether d is before e.
func (d Date) Before(e Date) bool { return d.Compare(e) < 0 }

// After reports whether d is after e.
func (d Date) After(e Date) bool { return d.Compare(e) > 0 }

// MarshalText returns the date as "2026-01-02", or nothing for the zero
// Date. An invalid date (2026-02-30) is an error, so it is never stored.
func (d Date) MarshalText() ([]byte, error) {
	if d.IsZero() {
		return []byte{}, nil
	}
	if !d.IsValid() {
		return nil, fmt.Errorf("codec: invalid date %d-%02d-%02d", d.Year, int(d.Month), d.Day)
	}
	return fmt.Appendf(nil, "%04d-%02d-%02d", d.Year, int(d.Month), d.Day), nil
}

// UnmarshalText parses a date written by MarshalText ("" is the zero Date).
func (d *Date) UnmarshalText(text []byte) error {
	if len(text) == 0 {
		*d = Date{}
		return nil
	}
	p, err := ParseDate(string(text))
	if err != nil {
		return err
	}
	*d = p
	return nil
}
