package codec_test

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sourced-go/sourced/codec"
)

type schedule struct {
	CourseID string    `json:"course_id" sourced:"required"`
	Seats    int       `json:"seats" sourced:"required"`
	Price    *decimal  `json:"price" sourced:"required"`
	StartsOn time.Time `json:"starts_on"`
	EndsOn   time.Time `json:"ends_on"`
	Tags     []string  `json:"tags"`
	Venue    address   `json:"venue"`
	Level    level     `json:"level"`
	Notes    any       `json:"notes"`
}

// Validate has a value receiver and reports several problems joined.
func (s schedule) Validate() error {
	var errs []error
	if s.Seats < 0 {
		errs = append(errs, codec.FieldError{Field: "seats", Problem: "must not be negative"})
	}
	if !s.EndsOn.IsZero() && s.EndsOn.Before(s.StartsOn) {
		errs = append(errs, errors.New("ends before it starts"))
	}
	if s.Level == "forbidden" {
		errs = append(errs, &codec.ValidationError{Fields: []codec.FieldError{{Field: "level", Problem: "is forbidden"}}})
	}
	return errors.Join(errs...)
}

// normalised has a pointer-receiver Validate that modifies its receiver.
type normalised struct {
	Email string `json:"email" sourced:"required"`
}

func (n *normalised) Validate() error {
	n.Email = strings.ToLower(n.Email)
	if !strings.Contains(n.Email, "@") {
		return fmt.Errorf("checking: %w", codec.FieldError{Field: "email", Problem: "is not an address"})
	}
	return nil
}

func fieldsOf(t *testing.T, err error) []codec.FieldError {
	t.Helper()
	if err == nil {
		return nil
	}
	if !errors.Is(err, codec.ErrInvalid) {
		t.Fatalf("error %v does not match ErrInvalid", err)
	}
	var ve *codec.ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("error %v is not a *ValidationError", err)
	}
	return ve.Fields
}

func TestValidate(t *testing.T) {
	r := codec.NewRegistry()
	codec.MustRegister[schedule](r, "courses.scheduled")
	codec.MustRegister[normalised](r, "normalised")
	day := time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name    string
		payload any
		want    []codec.FieldError
	}{
		{"valid", schedule{CourseID: "c1", Seats: 3, Price: &decimal{}}, nil},
		{"valid pointer", &schedule{CourseID: "c1", Seats: 3, Price: &decimal{}}, nil},
		{"required zero values", schedule{}, []codec.FieldError{
			{"course_id", "is required"}, {"seats", "is required"}, {"price", "is required"}}},
		{"validator problems are merged", schedule{CourseID: "c", Seats: -1, Price: &decimal{}, StartsOn: day, EndsOn: day.Add(-time.Hour), Level: "forbidden"},
			[]codec.FieldError{{"seats", "must not be negative"}, {"level", "is forbidden"}, {"", "ends before it starts"}}},
		{"pointer receiver, value payload", normalised{Email: "nope"}, []codec.FieldError{{"email", "is not an address"}}},
		{"pointer receiver, pointer payload", &normalised{Email: "A@B"}, nil},
		{"nil pointer", (*normalised)(nil), []codec.FieldError{{"", "the payload is a nil pointer"}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := fieldsOf(t, r.Validate(c.payload)); !reflect.DeepEqual(got, c.want) {
				t.Errorf("Validate fields:\n got %q\nwant %q", got, c.want)
			}
		})
	}

	// A value payload is never modified by a pointer-receiver Validate.
	var payload any = normalised{Email: "UP@X"}
	if err := r.Validate(payload); err != nil {
		t.Fatal(err)
	}
	if payload.(normalised).Email != "UP@X" {
		t.Error("Validate modified a value payload")
	}
	typ, _ := r.ByName("normalised")
	if err := typ.Validate(other{}); err == nil || errors.Is(err, codec.ErrInvalid) {
		t.Errorf("Type.Validate(wrong type) = %v", err)
	}
}

func TestValidationErrorMessage(t *testing.T) {
	err := &codec.ValidationError{Type: "courses.scheduled", Fields: []codec.FieldError{
		{"course_id", "is required"}, {"", "ends before it starts"},
	}}
	want := `codec: invalid "courses.scheduled" payload: course_id: is required; ends before it starts`
	if err.Error() != want {
		t.Errorf("Error() = %q, want %q", err.Error(), want)
	}
	if !errors.Is(fmt.Errorf("wrapped: %w", err), codec.ErrInvalid) {
		t.Error("a wrapped *ValidationError does not match ErrInvalid")
	}
}

func TestFromMap(t *testing.T) {
	r := codec.NewRegistry()
	codec.MustRegister[schedule](r, "courses.scheduled")
	codec.MustRegister[normalised](r, "normalised")

	t.Run("valid JSON input", func(t *testing.T) {
		got, err := r.FromMap("courses.scheduled", map[string]any{
			"course_id": "c1",
			"seats":     float64(30), // as encoding/json decodes numbers into any
			"price":     "19.99",
			"starts_on": "2026-01-02T09:00:00+01:00",
			"tags":      []any{"maths", "evening"},
			"venue":     map[string]any{"street": "rue", "zip": float64(75011)},
			"level":     "gold",
			"notes":     map[string]any{"free": []any{1.0, "form"}},
		})
		if err != nil {
			t.Fatal(err)
		}
		s, ok := got.(schedule)
		if !ok {
			t.Fatalf("FromMap returned a %T, want the struct value", got)
		}
		if s.CourseID != "c1" || s.Seats != 30 || *s.Price != (decimal{1999}) || !s.StartsOn.Equal(time.Date(2026, 1, 2, 8, 0, 0, 0, time.UTC)) ||
			!reflect.DeepEqual(s.Tags, []string{"maths", "evening"}) || s.Venue.Street != "rue" || *s.Venue.Zip != 75011 || s.Level != "gold" ||
			!reflect.DeepEqual(s.Notes, map[string]any{"free": []any{1.0, "form"}}) {
			t.Errorf("FromMap = %+v", s)
		}
	})

	t.Run("native Go values", func(t *testing.T) {
		got, err := r.FromMap("courses.scheduled", map[string]any{
			"course_id": "c1", "seats": 2, "price": decimal{5}, "starts_on": time.Unix(0, 0), "tags": []string{"x"},
		})
		if err != nil || got.(schedule).Seats != 2 || got.(schedule).Price.units != 5 {
			t.Errorf("FromMap = %+v, %v", got, err)
		}
	})

	t.Run("every failing field is listed", func(t *testing.T) {
		_, err := r.FromMap("courses.scheduled", map[string]any{
			"course_id": 12,
			"seats":     1.5,
			"starts_on": "next tuesday",
			"ends_on":   true,
			"tags":      "maths",
			"venue":     map[string]any{"zip": "75011"},
			"price":     nil,
			"level":     "forbidden",
			"colour":    "red",
			"CourseID":  "c1",
		})
		want := []codec.FieldError{
			{"course_id", "must be a string, got number"},
			{"seats", "must be an integer (int), got number 1.5"},
			{"price", "is required"},
			{"starts_on", `must be an RFC 3339 time string, got "next tuesday"`},
			{"ends_on", "must be an RFC 3339 time string, got bool"},
			{"tags", "must be an array, got string"},
			{"venue.zip", "must be an integer (int), got string"},
			{"level", "is forbidden"},
			{"CourseID", `is not an attribute of "courses.scheduled"`},
			{"colour", `is not an attribute of "courses.scheduled"`},
		}
		if got := fieldsOf(t, err); !reflect.DeepEqual(got, want) {
			t.Errorf("FromMap fields:\n got %q\nwant %q", got, want)
		}
	})

	t.Run("missing required and validator", func(t *testing.T) {
		_, err := r.FromMap("courses.scheduled", map[string]any{"seats": -2.0, "price": "1.00"})
		want := []codec.FieldError{{"course_id", "is required"}, {"seats", "must not be negative"}}
		if got := fieldsOf(t, err); !reflect.DeepEqual(got, want) {
			t.Errorf("FromMap fields:\n got %q\nwant %q", got, want)
		}
	})

	t.Run("a failed field silences the validator about it", func(t *testing.T) {
		_, err := r.FromMap("normalised", map[string]any{"email": []any{}})
		want := []codec.FieldError{{"email", "must be a string, got array"}}
		if got := fieldsOf(t, err); !reflect.DeepEqual(got, want) {
			t.Errorf("FromMap fields:\n got %q\nwant %q", got, want)
		}
	})

	t.Run("pointer-receiver validator sees the built value", func(t *testing.T) {
		got, err := r.FromMap("normalised", map[string]any{"email": "ADA@EXAMPLE.COM"})
		if err != nil || got.(normalised).Email != "ada@example.com" {
			t.Errorf("FromMap = %+v, %v", got, err)
		}
	})

	t.Run("nil map", func(t *testing.T) {
		_, err := r.FromMap("normalised", nil)
		if got := fieldsOf(t, err); !reflect.DeepEqual(got, []codec.FieldError{{"email", "is required"}}) {
			t.Errorf("FromMap(nil) fields = %q", got)
		}
	})

	t.Run("embedded pointer is allocated", func(t *testing.T) {
		codec.MustRegister[embeds](r, "embeds")
		got, err := r.FromMap("embeds", map[string]any{"inner": "i", "outer": "o"})
		if err != nil || got.(embeds).Embedded == nil || got.(embeds).Inner != "i" {
			t.Errorf("FromMap = %+v, %v", got, err)
		}
	})
}
