package core_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/core"
)

type request struct {
	User      string
	RequestID string
}

func TestCommandContextBuild(t *testing.T) {
	cc := core.NewCommandContext[request](registry()).WithCommandsOf(courseDecider, enrolmentDecider).
		WithMetadata(map[string]any{"source": "web"})
	cc = core.On[CreateCourse](cc, func(app request, m core.Message) (core.Message, error) {
		return m.WithMetadata(map[string]any{"created_by": app.User}), nil
	})
	cc = core.On[CreateCourse](cc, func(app request, m core.Message) (core.Message, error) {
		return m.WithMetadata(map[string]any{"order": m.Metadata["created_by"].(string) + "-second"}), nil
	})
	cc = cc.Any(func(app request, m core.Message) (core.Message, error) {
		return m.WithMetadata(map[string]any{"request_id": app.RequestID}), nil
	})
	m, err := cc.Build(request{User: "u1", RequestID: "r1"}, "courses.create", map[string]any{"course_id": "c1", "course_name": "Algebra"})
	if err != nil {
		t.Fatal(err)
	}
	if m.Type != "courses.create" || m.Payload != (CreateCourse{CourseID: "c1", CourseName: "Algebra"}) {
		t.Fatalf("command %+v", m)
	}
	want := map[string]any{"source": "web", "created_by": "u1", "order": "u1-second", "request_id": "r1"}
	for k, v := range want {
		if m.Metadata[k] != v {
			t.Errorf("metadata %s = %v, want %v", k, m.Metadata[k], v)
		}
	}
	enrol, err := cc.Build(request{RequestID: "r2"}, "courses.enrol_student", map[string]any{"course_id": "c1", "student_id": "s1"})
	if err != nil || enrol.Metadata["created_by"] != nil || enrol.Metadata["request_id"] != "r2" {
		t.Fatalf("per-type hooks only for their type: %+v %v", enrol.Metadata, err)
	}
}

func TestCommandContextRejects(t *testing.T) {
	cc := core.NewCommandContext[request](registry()).WithScope("courses.create")
	if _, err := cc.Build(request{}, "courses.enrol_student", nil); !errors.Is(err, core.ErrUnknownMessage) {
		t.Fatalf("out of scope: %v", err)
	}
	if _, err := cc.Build(request{}, "admin.delete_all", nil); !errors.Is(err, core.ErrUnknownMessage) {
		t.Fatalf("unknown type: %v", err)
	}
	if _, err := cc.BuildPayload(request{}, EnrolStudent{}); !errors.Is(err, core.ErrUnknownMessage) {
		t.Fatalf("out of scope payload: %v", err)
	}
	_, err := cc.Build(request{}, "courses.create", map[string]any{"course_id": 7, "extra": true})
	var ve *codec.ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("invalid input: %v", err)
	}
	for _, f := range []string{"course_id", "course_name", "extra"} {
		if !strings.Contains(err.Error(), f) {
			t.Errorf("the error does not name %s: %v", f, err)
		}
	}
	hookErr := errors.New("not allowed")
	cc = cc.Any(func(request, core.Message) (core.Message, error) { return core.Message{}, hookErr })
	if _, err := cc.BuildPayload(request{}, CreateCourse{CourseID: "c", CourseName: "n"}); !errors.Is(err, hookErr) {
		t.Fatalf("hook error: %v", err)
	}
}

// An unscoped context builds no type at all: raw client input never
// becomes an event (or a workflow's internal message) unless asked for.
func TestCommandContextBuildsCommandsOnlyByDefault(t *testing.T) {
	raw := map[string]any{"course_id": "c1", "course_name": "Algebra"}
	unscoped := core.NewCommandContext[request](registry())
	for _, typ := range []string{"courses.created", "courses.create"} {
		if m, err := unscoped.Build(request{}, typ, raw); !errors.Is(err, core.ErrUnknownMessage) || !strings.Contains(err.Error(), "WithCommandsOf") {
			t.Errorf("unscoped Build %s: %+v %v, want ErrUnknownMessage saying how to scope", typ, m, err)
		}
	}
	if _, err := unscoped.BuildPayload(request{}, CourseCreated{CourseID: "c1"}); !errors.Is(err, core.ErrUnknownMessage) {
		t.Errorf("unscoped BuildPayload of an event: %v", err)
	}
	cmds := unscoped.WithCommandsOf(courseDecider, enrolmentDecider)
	if _, err := cmds.Build(request{}, "courses.create", raw); err != nil {
		t.Errorf("WithCommandsOf builds a decided command: %v", err)
	}
	if _, err := cmds.Build(request{}, "courses.enrol_student", map[string]any{"course_id": "c1", "student_id": "s1"}); err != nil {
		t.Errorf("WithCommandsOf builds the other decider's command: %v", err)
	}
	for _, typ := range []string{"courses.created", "courses.student_enrolled", "students.notify"} {
		if _, err := cmds.Build(request{}, typ, map[string]any{}); !errors.Is(err, core.ErrUnknownMessage) {
			t.Errorf("WithCommandsOf builds %s, which no decider decides: %v", typ, err)
		}
	}
	if _, err := cmds.BuildPayload(request{}, CourseCreated{CourseID: "c1"}); !errors.Is(err, core.ErrUnknownMessage) {
		t.Errorf("WithCommandsOf BuildPayload of an event: %v", err)
	}
	if m, err := unscoped.AllowAnyType().Build(request{}, "courses.created", raw); err != nil || m.Type != "courses.created" {
		t.Errorf("AllowAnyType builds an event when asked explicitly: %+v %v", m, err)
	}
	long := strings.Repeat("x", 100_000)
	if _, err := cmds.Build(request{}, long, nil); err == nil || len(err.Error()) > 1000 {
		t.Errorf("an unknown type of 100 KB: the error is %d bytes", len(err.Error()))
	}
}
