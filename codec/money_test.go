package codec_test

import (
	"errors"
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/sourced-go/sourced/codec"
)

type invoiced struct {
	Invoice string          `json:"invoice"`
	Due     codec.Date      `json:"due"`
	Amount  codec.Decimal   `json:"amount"`
	Paid    *codec.Date     `json:"paid"`
	Lines   []codec.Decimal `json:"lines"`
}

func TestDateAndDecimalRoundTripAndIndex(t *testing.T) {
	r := codec.NewRegistry()
	codec.MustRegister[invoiced](r, "invoices.issued")
	paid := codec.Date{Year: 2026, Month: time.January, Day: 30}
	in := invoiced{
		Invoice: "i-1",
		Due:     codec.Date{Year: 2026, Month: time.January, Day: 2},
		Amount:  codec.MustDecimal("19.90"),
		Paid:    &paid,
		Lines:   []codec.Decimal{codec.MustDecimal("0.1"), codec.MustDecimal("-1234567890.123456789")},
	}
	_, data, err := r.Encode(in)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"invoice":"i-1","due":"2026-01-02","amount":"19.90","paid":"2026-01-30","lines":["0.1","-1234567890.123456789"]}`
	if string(data) != want {
		t.Fatalf("encoded\n %s\nwant\n %s", data, want)
	}
	back, err := r.Decode("invoices.issued", 0, data)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, in) {
		t.Fatalf("decoded %+v, want %+v", back, in)
	}
	keys, err := r.Keys(in, nil)
	if err != nil {
		t.Fatal(err)
	}
	wantKeys := []codec.KeyPair{
		{Name: "amount", Value: "19.90"},
		{Name: "due", Value: "2026-01-02"},
		{Name: "invoice", Value: "i-1"},
		{Name: "lines", Value: "-1234567890.123456789"},
		{Name: "lines", Value: "0.1"},
		{Name: "paid", Value: "2026-01-30"},
	}
	if !reflect.DeepEqual(keys, wantKeys) {
		t.Fatalf("keys %v, want %v", keys, wantKeys)
	}
	for v, want := range map[any]string{in.Due: "2026-01-02", in.Amount: "19.90", &paid: "2026-01-30"} {
		if got, err := codec.Canonical(v); err != nil || got != want {
			t.Errorf("Canonical(%v) = %q, %v; want %q", v, got, err, want)
		}
	}

	// A request body: a number is taken digit for digit, not through a float.
	p, err := r.FromMap("invoices.issued", map[string]any{"invoice": "i-2", "due": "2026-02-28", "amount": 0.1, "lines": []any{"3", 1e-7}})
	if err != nil {
		t.Fatal(err)
	}
	got := p.(invoiced)
	if got.Amount.String() != "0.1" || got.Due != (codec.Date{Year: 2026, Month: 2, Day: 28}) || got.Lines[1].String() != "0.0000001" {
		t.Fatalf("FromMap: %+v", got)
	}
	_, err = r.FromMap("invoices.issued", map[string]any{"due": "2026-02-30", "amount": "1,5"})
	var ve *codec.ValidationError
	if !errors.As(err, &ve) || len(ve.Fields) != 2 || ve.Fields[0].Field != "due" || ve.Fields[1].Field != "amount" {
		t.Fatalf("FromMap of a bad date and a bad decimal: %v", err)
	}

	// The zero values are stored and read back.
	_, data, err = r.Encode(invoiced{})
	if err != nil || string(data) != `{"invoice":"","due":"","amount":"0","paid":null,"lines":null}` {
		t.Fatalf("zero encoded %s, %v", data, err)
	}
	if back, err := r.Decode("invoices.issued", 0, data); err != nil || !reflect.DeepEqual(back, invoiced{}) {
		t.Fatalf("zero decoded %+v, %v", back, err)
	}
	// An invalid date is never stored.
	if _, _, err := r.Encode(invoiced{Due: codec.Date{Year: 2026, Month: 2, Day: 30}}); err == nil {
		t.Fatal("encoded 2026-02-30")
	}
}

func TestDate(t *testing.T) {
	d, err := codec.ParseDate("2024-02-29")
	if err != nil || d != (codec.Date{Year: 2024, Month: 2, Day: 29}) || d.String() != "2024-02-29" {
		t.Fatalf("ParseDate = %v, %v", d, err)
	}
	for _, bad := range []string{"2023-02-29", "2026-1-2", "2026-01-02T00:00:00Z", "", "02/01/2026"} {
		if _, err := codec.ParseDate(bad); err == nil {
			t.Errorf("ParseDate(%q) accepted", bad)
		}
	}
	if got := d.AddDays(1); got != (codec.Date{Year: 2024, Month: 3, Day: 1}) {
		t.Errorf("AddDays(1) = %v", got)
	}
	if n := (codec.Date{Year: 2025, Month: 1, Day: 1}).DaysSince(d); n != 307 {
		t.Errorf("DaysSince = %d, want 307", n)
	}
	if !d.Before(d.AddDays(1)) || !d.AddDays(-1).Before(d) || d.After(d) || d.Compare(d) != 0 {
		t.Error("Compare")
	}
	// Late in the day west of UTC is still that day.
	ny := time.FixedZone("ny", -5*3600)
	if got := codec.DateOf(time.Date(2026, 1, 2, 23, 30, 0, 0, ny)); got.String() != "2026-01-02" {
		t.Errorf("DateOf = %v", got)
	}
	if !d.In(ny).Equal(time.Date(2024, 2, 29, 5, 0, 0, 0, time.UTC)) {
		t.Errorf("In = %v", d.In(ny))
	}
	// Key strings sort as the dates do.
	a, _ := codec.Canonical(codec.Date{Year: 999, Month: 12, Day: 31})
	b, _ := codec.Canonical(codec.Date{Year: 2026, Month: 1, Day: 2})
	if !(a < b) {
		t.Errorf("keys %q, %q do not sort as the dates", a, b)
	}
}

func TestDecimal(t *testing.T) {
	dec := codec.MustDecimal
	for in, want := range map[string]string{"19.99": "19.99", "19.90": "19.90", "+7": "7", "-0.05": "-0.05", "007.50": "7.50", "-0": "0", "1e-07": "0.0000001", "1.5e3": "1500", "2E+2": "200", "1.25e1": "12.5", "0e30": "0",
		"9223372036854775807": "9223372036854775807", "0.000000000000000001": "0.000000000000000001"} {
		if got := dec(in).String(); got != want {
			t.Errorf("ParseDecimal(%q) = %s, want %s", in, got, want)
		}
	}
	for _, bad := range []string{"", "-", ".5", "5.", "1e", "1e99", "1e19", "1,5", " 1", "0x10", "9223372036854775808", "0.0000000000000000001", "1.2.3"} {
		if d, err := codec.ParseDecimal(bad); err == nil {
			t.Errorf("ParseDecimal(%q) = %v, want an error", bad, d)
		}
	}
	if _, err := codec.ParseDecimal("99999999999999999999"); !errors.Is(err, codec.ErrDecimalRange) {
		t.Errorf("overflow: %v, want ErrDecimalRange", err)
	}

	sum, err := dec("0.1").Add(dec("0.2"))
	if err != nil || sum.String() != "0.3" || !sum.Equal(dec("0.30")) || sum == dec("0.30") {
		t.Errorf("0.1 + 0.2 = %v, %v", sum, err)
	}
	if got, _ := dec("19.99").Sub(dec("20")); got.String() != "-0.01" {
		t.Errorf("19.99 - 20 = %v", got)
	}
	if got, _ := dec("19.99").Mul(dec("-3")); got.String() != "-59.97" {
		t.Errorf("19.99 × -3 = %v", got)
	}
	if got, _ := dec("19.99").Mul(dec("0.2")); got.String() != "3.998" || got.Round(2).String() != "4.00" {
		t.Errorf("19.99 × 0.2 = %v, rounded %v", got, got.Round(2))
	}
	for in, want := range map[string]string{"0.125": "0.12", "0.135": "0.14", "-0.125": "-0.12", "-0.126": "-0.13", "2.5": "2.5"} {
		if got := dec(in).Round(2); got.String() != want {
			t.Errorf("Round(%s, 2) = %v, want %s", in, got, want)
		}
	}
	if got, err := dec("19.9").Rescale(2); err != nil || got.String() != "19.90" {
		t.Errorf("Rescale up: %v, %v", got, err)
	}
	if got, err := dec("19.90").Rescale(1); err != nil || got.String() != "19.9" {
		t.Errorf("Rescale down: %v, %v", got, err)
	}
	if _, err := dec("19.99").Rescale(1); err == nil {
		t.Error("Rescale dropped a digit")
	}
	big := dec("9223372036854775807")
	if _, err := big.Add(dec("1")); !errors.Is(err, codec.ErrDecimalRange) {
		t.Errorf("overflow on Add: %v", err)
	}
	if _, err := big.Neg().Sub(dec("1")); !errors.Is(err, codec.ErrDecimalRange) {
		t.Errorf("overflow on Sub: %v", err)
	}
	if _, err := big.Mul(dec("2")); !errors.Is(err, codec.ErrDecimalRange) {
		t.Errorf("overflow on Mul: %v", err)
	}
	if _, err := dec("1").Add(dec("0.000000000000000001")); err != nil {
		t.Errorf("1 + 1e-18: %v", err)
	}
	if _, err := dec("10").Add(dec("0.000000000000000001")); !errors.Is(err, codec.ErrDecimalRange) {
		t.Errorf("10 + 1e-18 needs 20 digits: %v", err)
	}
	// Cmp is numeric, even where aligning the scales overflows int64.
	for _, c := range []struct {
		a, b string
		want int
	}{{"19.9", "19.90", 0}, {"-1", "1", -1}, {"9223372036854775807", "0.000000000000000001", 1}, {"-9223372036854775807", "-0.5", -1}, {"0", "-0.00", 0}, {"2.5", "2.49", 1}} {
		if got := dec(c.a).Cmp(dec(c.b)); got != c.want {
			t.Errorf("Cmp(%s, %s) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
	if _, err := codec.NewDecimal(math.MinInt64, 0); err == nil {
		t.Error("NewDecimal(MinInt64)")
	}
	if d, err := codec.NewDecimal(1999, 2); err != nil || d != dec("19.99") {
		t.Errorf("NewDecimal(1999, 2) = %v, %v", d, err)
	}
	if u, s := dec("-19.99").Units(); u != -1999 || s != 2 {
		t.Errorf("Units = %d, %d", u, s)
	}
}
