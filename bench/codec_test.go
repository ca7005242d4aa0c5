package bench

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/sourced-go/sourced/codec"
)

// enrolled is a typical 6-attribute event: 3 strings, an int, a bool, a time.
type enrolled struct {
	CourseID   string    `json:"course_id"`
	StudentID  string    `json:"student_id"`
	Name       string    `json:"name"`
	Seat       int       `json:"seat"`
	Paid       bool      `json:"paid"`
	EnrolledAt time.Time `json:"enrolled_at"`
}

func benchPayload() enrolled {
	return enrolled{
		CourseID:   "c-0193a1b2-7c3d-7e4f-8a9b-0c1d2e3f4a5b",
		StudentID:  "s-0193a1b2-7c3d-7e4f-8a9b-0c1d2e3f4a5c",
		Name:       "Ada Lovelace",
		Seat:       42,
		Paid:       true,
		EnrolledAt: time.Date(2026, 1, 2, 15, 4, 5, 123456789, time.FixedZone("CET", 3600)),
	}
}

func benchRegistry(b *testing.B) *codec.Registry {
	b.Helper()
	r := codec.NewRegistry()
	if err := codec.Register[enrolled](r, "courses.enrolled"); err != nil {
		b.Fatal(err)
	}
	return r
}

// BenchmarkCodecEncode compares Registry.Encode with plain encoding/json on
// the same struct (the contract: within 1.5x).
func BenchmarkCodecEncode(b *testing.B) {
	r := benchRegistry(b)
	var payload any = benchPayload()
	b.Run("sourced", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, _, err := r.Encode(payload); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding_json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := json.Marshal(payload); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkCodecDecode compares Registry.Decode (current version) with
// plain encoding/json into the same struct (the contract: within 1.5x).
func BenchmarkCodecDecode(b *testing.B) {
	r := benchRegistry(b)
	_, data, err := r.Encode(benchPayload())
	if err != nil {
		b.Fatal(err)
	}
	b.Run("sourced", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := r.Decode("courses.enrolled", 1, data); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding_json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var v enrolled
			if err := json.Unmarshal(data, &v); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkKeyExtraction measures the key pairs of one 6-attribute message
// (the contract: under 300 ns and at most 2 allocations with dst nil).
func BenchmarkKeyExtraction(b *testing.B) {
	r := benchRegistry(b)
	var payload any = benchPayload()
	t, err := r.TypeOf(payload)
	if err != nil {
		b.Fatal(err)
	}
	if got := len(t.Keys(payload, nil)); got != 6 {
		b.Fatalf("got %d key pairs, want 6", got)
	}
	b.Run("type", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = t.Keys(payload, nil)
		}
	})
	b.Run("registry", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := r.Keys(payload, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("reuse_dst", func(b *testing.B) {
		b.ReportAllocs()
		var dst []codec.KeyPair
		for b.Loop() {
			dst = t.Keys(payload, dst[:0])
		}
	})
}
