package cli

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell"
)

// chainFixture installs a store holding a chain of three messages (each
// correlated from the one before) interleaved with an unrelated one:
//
//	1 courses.created c1  (the chain's root)
//	2 courses.created c2  (unrelated)
//	3 courses.reminder c1 (caused by 1)
//	4 courses.reminder c9 (caused by 3)
//
// It returns the file and the stored messages.
func chainFixture(t *testing.T) (string, []core.Message) {
	t.Helper()
	ctx := context.Background()
	path, s := emptyStore(t)
	defer s.Close()
	var stored []core.Message
	add := func(m core.Message) core.Message {
		res, err := s.Append(ctx, []core.Message{m}, shell.AppendOptions{})
		if err != nil {
			t.Fatal(err)
		}
		stored = append(stored, res.Messages[0])
		return res.Messages[0]
	}
	root := add(core.NewMessage(CourseCreated{CourseID: "c1", CourseName: "Algebra"}))
	add(core.NewMessage(CourseCreated{CourseID: "c2", CourseName: "History"}))
	second := add(core.NewMessage(Reminder{CourseID: "c1"}).Correlate(root))
	add(core.NewMessage(Reminder{CourseID: "c9"}).Correlate(second))
	return path, stored
}

func TestTrace(t *testing.T) {
	db, msgs := chainFixture(t)
	for _, from := range []int{0, 2, 3} {
		out, errOut, code := cli(t, "-db", db, "trace", msgs[from].ID.String())
		if code != 0 {
			t.Fatalf("trace from message %d: exit %d: %s", from+1, code, errOut)
		}
		var positions []string
		for _, line := range strings.Split(strings.TrimSpace(out), "\n")[1:] {
			positions = append(positions, strings.Fields(line)[0])
		}
		if got := strings.Join(positions, " "); got != "1 3 4" || !strings.HasPrefix(out, "POSITION") {
			t.Fatalf("trace from message %d: positions %q, want \"1 3 4\":\n%s", from+1, got, out)
		}
		for _, want := range []string{`{"course_id":"c1","course_name":"Algebra"}`, `{"course_id":"c9"}`} {
			if !strings.Contains(out, want) {
				t.Errorf("trace lacks %q:\n%s", want, out)
			}
		}
		if strings.Contains(out, "History") {
			t.Errorf("trace shows the unrelated message:\n%s", out)
		}
	}

	out, errOut, code := cli(t, "-db", db, "-json", "trace", msgs[3].ID.String())
	if code != 0 {
		t.Fatalf("trace -json: exit %d: %s", code, errOut)
	}
	var chain struct {
		CorrelationID string `json:"correlation_id"`
		Messages      []struct {
			Position    int64             `json:"position"`
			ID          string            `json:"id"`
			CausationID string            `json:"causation_id"`
			Payload     map[string]string `json:"payload"`
		} `json:"messages"`
	}
	if err := json.Unmarshal([]byte(out), &chain); err != nil {
		t.Fatalf("trace JSON %s: %v", out, err)
	}
	if chain.CorrelationID != msgs[0].ID.String() || len(chain.Messages) != 3 {
		t.Fatalf("trace JSON: correlation %s, %d messages; want %s, 3:\n%s", chain.CorrelationID, len(chain.Messages), msgs[0].ID, out)
	}
	for i, want := range []int{0, 2, 3} {
		got := chain.Messages[i]
		if got.Position != int64(want+1) || got.ID != msgs[want].ID.String() || got.CausationID != msgs[want].CausationID.String() {
			t.Errorf("trace JSON message %d: %+v, want message %d %s", i, got, want+1, msgs[want].ID)
		}
	}
	if chain.Messages[1].Payload["course_id"] != "c1" {
		t.Errorf("trace JSON payload %v", chain.Messages[1].Payload)
	}
}

func TestTraceErrors(t *testing.T) {
	db, _ := chainFixture(t)
	for _, tc := range []struct {
		name string
		args []string
		code int
		want []string
	}{
		{"not a UUID", []string{"-db", db, "trace", "forty-two"}, 2, []string{`trace: "forty-two" is not a message id or a position`, "usage: sourced trace ID|POSITION"}},
		{"no id", []string{"-db", db, "trace"}, 2, []string{"trace: want one message id or position", "usage: sourced trace"}},
		{"two ids", []string{"-db", db, "trace", uuid.NewString(), uuid.NewString()}, 2, []string{"trace: unexpected argument"}},
		{"position zero", []string{"-db", db, "trace", "0"}, 2, []string{"positions start at 1"}},
		{"position past the end", []string{"-db", db, "trace", "42"}, 1, []string{"no message at position 42 (the log ends at 4"}},
		{"unknown id", []string{"-db", db, "trace", "01a22fc3-69c7-70b4-93f3-7c2c11288a0a"}, 1, []string{"no message 01a22fc3-69c7-70b4-93f3-7c2c11288a0a in the log"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, errOut, code := cli(t, tc.args...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d: %s%s", code, tc.code, out, errOut)
			}
			for _, w := range tc.want {
				if !strings.Contains(errOut, w) {
					t.Errorf("error output lacks %q:\n%s", w, errOut)
				}
			}
		})
	}
}
