package codec_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/sourced-go/sourced/codec"
)

// CourseCreated is an event payload: its attributes are its JSON fields.
type CourseCreated struct {
	CourseID string    `json:"course_id" sourced:"required"`
	Name     string    `json:"name"`
	Seats    int       `json:"seats"`
	Tags     []string  `json:"tags,omitempty"`
	StartsOn time.Time `json:"starts_on"`
	Notes    string    `json:"notes,omitempty" sourced:"noindex"`
}

func ExampleRegister() {
	reg := codec.NewRegistry()
	if err := codec.Register[CourseCreated](reg, "courses.created"); err != nil {
		panic(err)
	}
	typ, _ := reg.ByName("courses.created")
	for _, f := range typ.Fields {
		fmt.Printf("%-9s required=%-5v indexed=%-5v multi=%v\n", f.Name, f.Required, f.Indexed, f.Multi)
	}

	// Registering the same name again is an error naming both Go types.
	err := codec.Register[struct{ X int }](reg, "courses.created")
	fmt.Println(err != nil)
	// Output:
	// course_id required=true  indexed=true  multi=false
	// name      required=false indexed=true  multi=false
	// seats     required=false indexed=true  multi=false
	// tags      required=false indexed=true  multi=true
	// starts_on required=false indexed=true  multi=false
	// notes     required=false indexed=false multi=false
	// true
}

func ExampleRegister_unencodable() {
	type Bad struct {
		Address struct {
			Updates chan string `json:"updates"`
		} `json:"address"`
	}
	err := codec.Register[Bad](codec.NewRegistry(), "bad.payload")
	fmt.Println(err)
	// Output:
	// codec: register "bad.payload" (codec_test.Bad): attribute "address.updates" has type chan string, which JSON cannot encode (chan)
}

func ExampleRegistry_Encode() {
	reg := codec.NewRegistry()
	codec.MustRegister[CourseCreated](reg, "courses.created")
	typ, data, err := reg.Encode(CourseCreated{
		CourseID: "c1", Name: "Algebra", Seats: 30,
		StartsOn: time.Date(2026, 1, 2, 9, 0, 0, 0, time.UTC),
	})
	fmt.Println(typ.Name, typ.Version, err)
	fmt.Println(string(data))
	// Output:
	// courses.created 1 <nil>
	// {"course_id":"c1","name":"Algebra","seats":30,"starts_on":"2026-01-02T09:00:00Z"}
}

func ExampleRegistry_Decode() {
	reg := codec.NewRegistry()
	codec.MustRegister[CourseCreated](reg, "courses.created")
	payload, err := reg.Decode("courses.created", 1, []byte(`{"course_id":"c1","name":"Algebra","seats":30}`))
	if err != nil {
		panic(err)
	}
	course := payload.(CourseCreated) // a value, not a pointer
	fmt.Println(course.CourseID, course.Name, course.Seats)

	_, err = reg.Decode("courses.deleted", 1, []byte(`{}`))
	fmt.Println(errors.Is(err, codec.ErrUnknownType))
	// Output:
	// c1 Algebra 30
	// true
}

func ExampleType_Keys() {
	reg := codec.NewRegistry()
	codec.MustRegister[CourseCreated](reg, "courses.created")
	typ, _ := reg.ByName("courses.created")
	keys := typ.Keys(CourseCreated{
		CourseID: "c1", Name: "Algebra", Seats: 30,
		Tags:     []string{"maths", "evening", "maths"},
		StartsOn: time.Date(2026, 1, 2, 9, 0, 0, 0, time.FixedZone("CET", 3600)),
		Notes:    "not indexed",
	}, nil)
	for _, k := range keys {
		fmt.Println(k)
	}
	// Output:
	// course_id=c1
	// name=Algebra
	// seats=30
	// starts_on=2026-01-02T08:00:00.000000Z
	// tags=evening
	// tags=maths
}

func ExampleCanonical() {
	for _, v := range []any{"c1", 42, true, 2.5, time.Date(2026, 1, 2, 9, 0, 0, 1500, time.UTC)} {
		s, _ := codec.Canonical(v)
		fmt.Println(s)
	}
	_, err := codec.Canonical([]string{"a"})
	fmt.Println(err)
	// Output:
	// c1
	// 42
	// true
	// 2.5
	// 2026-01-02T09:00:00.000001Z
	// codec: Canonical: []string is not a scalar (a string, bool, number, time.Time or encoding.TextMarshaler)
}

func ExampleRegistry_FromMap() {
	reg := codec.NewRegistry()
	codec.MustRegister[CourseCreated](reg, "courses.created")

	// For example a JSON request body decoded into a map.
	_, err := reg.FromMap("courses.created", map[string]any{
		"name":      42.0,
		"seats":     "thirty",
		"starts_on": "tomorrow",
		"colour":    "red",
	})
	var invalid *codec.ValidationError
	if errors.As(err, &invalid) {
		for _, f := range invalid.Fields {
			fmt.Printf("%s: %s\n", f.Field, f.Problem)
		}
	}
	fmt.Println(errors.Is(err, codec.ErrInvalid))
	// Output:
	// course_id: is required
	// name: must be a string, got number
	// seats: must be an integer (int), got string
	// starts_on: must be an RFC 3339 time string, got "tomorrow"
	// colour: is not an attribute of "courses.created"
	// true
}

// CourseRenamed is at version 2: version 1 called the name "title".
type CourseRenamed struct {
	CourseID string `json:"course_id"`
	Name     string `json:"name"`
}

func ExampleUpcast() {
	reg := codec.NewRegistry()
	codec.MustRegister[CourseRenamed](reg, "courses.renamed",
		codec.Version(2),
		codec.Upcast(1, func(old map[string]any) (map[string]any, error) {
			old["name"] = old["title"]
			delete(old, "title")
			return old, nil
		}))

	v1, _ := reg.Decode("courses.renamed", 1, []byte(`{"course_id":"c1","title":"Algebra"}`))
	v2, _ := reg.Decode("courses.renamed", 2, []byte(`{"course_id":"c1","name":"Algebra II"}`))
	fmt.Printf("%+v\n%+v\n", v1, v2)
	// Output:
	// {CourseID:c1 Name:Algebra}
	// {CourseID:c1 Name:Algebra II}
}

// Enrolment checks a rule across attributes.
type Enrolment struct {
	CourseID  string `json:"course_id" sourced:"required"`
	StudentID string `json:"student_id" sourced:"required"`
	Seat      int    `json:"seat"`
}

// Validate reports problems with attributes as FieldErrors.
func (e Enrolment) Validate() error {
	if e.Seat < 1 {
		return codec.FieldError{Field: "seat", Problem: "must be at least 1"}
	}
	return nil
}

func ExampleRegistry_Validate() {
	reg := codec.NewRegistry()
	codec.MustRegister[Enrolment](reg, "courses.enrolled")
	fmt.Println(reg.Validate(Enrolment{CourseID: "c1", Seat: 0}))
	fmt.Println(reg.Validate(Enrolment{CourseID: "c1", StudentID: "s1", Seat: 3}))
	// Output:
	// codec: invalid "courses.enrolled" payload: student_id: is required; seat: must be at least 1
	// <nil>
}
