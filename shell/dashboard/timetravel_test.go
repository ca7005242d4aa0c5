package dashboard_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell"
	"github.com/sourced-go/sourced/shell/dashboard"
)

// positionOf is the position of the first message of typ with the
// attribute values attrs.
func positionOf(t *testing.T, s shell.Store, typ string, attrs map[string]string) int64 {
	t.Helper()
	res, err := s.Read(context.Background(), []core.Condition{{Type: typ, Attrs: attrs}}, shell.ReadOptions{})
	if err != nil || len(res.Messages) == 0 {
		t.Fatalf("no %s %v: %v", typ, attrs, err)
	}
	return res.Messages[0].Position
}

var algebra = map[string]string{"course_id": "algebra"}

// stateAt folds group's state for the algebra course at position at.
func stateAt(t *testing.T, e *env, group string, at int64) dashboard.PartitionState {
	t.Helper()
	st, err := dashboard.StateAt(context.Background(), e.store, nil, e.app.Reactors(), dashboard.StateQuery{Group: group, Partition: algebra, At: at})
	if err != nil {
		t.Fatalf("%s at %d: %v", group, at, err)
	}
	return st
}

func stateJSON(t *testing.T, st dashboard.PartitionState) string {
	t.Helper()
	var v any
	if err := json.Unmarshal(st.State, &v); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// Time travel: the state a decider, a machine and a decision with a query
// hold for a partition just after three positions of the demo's history,
// the message handled next and what it produced, and the positions to
// step to.
func TestStateAtThreePositions(t *testing.T) {
	for name, mk := range stores {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, mk, dashboard.Options{})
			create := positionOf(t, e.store, "courses.create_course", algebra)
			created := positionOf(t, e.store, "courses.course_created", algebra)
			open := positionOf(t, e.store, "courses.open_course", algebra)
			opened := positionOf(t, e.store, "courses.lifecycle.runtime.open", algebra)
			reserve := positionOf(t, e.store, "courses.reserve_seat", algebra)
			reserved := positionOf(t, e.store, "courses.seat_reserved", algebra)
			enrolled := positionOf(t, e.store, "courses.student_enrolled", map[string]string{"course_id": "algebra", "student_id": "ada"})

			// A decider: before its command, after it, after its event.
			d := "courses.course_decider"
			st := stateAt(t, e, d, 0)
			if stateJSON(t, st) != "false" || st.Decision == nil || st.Decision.Message.Position != create || st.Next != create || st.Prev != 0 {
				t.Errorf("decider before its first message: state %s, decision %+v, next %d", st.State, st.Decision, st.Next)
			} else if len(st.Decision.Produced) != 1 || st.Decision.Produced[0].Position != created {
				t.Errorf("the command produced %+v, want course_created at %d", st.Decision.Produced, created)
			}
			st = stateAt(t, e, d, create)
			if stateJSON(t, st) != "false" || st.Decision != nil || st.Prev != 0 || st.Next != created || st.Folded != 0 {
				t.Errorf("decider after its command: state %s (want false: its event comes next), decision %+v, prev %d next %d", st.State, st.Decision, st.Prev, st.Next)
			}
			st = stateAt(t, e, d, dashboard.Latest)
			if stateJSON(t, st) != "true" || st.At != created || st.Prev != create || st.Next != 0 || st.Folded != 1 {
				t.Errorf("decider at its last message: state %s at %d, prev %d next %d", st.State, st.At, st.Prev, st.Next)
			}

			// A machine: not started, draft, open.
			m := "courses.lifecycle"
			st = stateAt(t, e, m, created-1)
			if len(st.Paths) != 0 || st.Kind != core.KindMachine || st.Decision == nil || st.Decision.Message.Position != created {
				t.Errorf("machine before its start: paths %v, decision %+v", st.Paths, st.Decision)
			}
			st = stateAt(t, e, m, open-1)
			if !slices.Equal(st.Paths, []string{"draft"}) || st.Decision == nil || st.Decision.Message.Position != open ||
				len(st.Decision.Produced) != 1 || st.Decision.Produced[0].Position != opened {
				t.Errorf("machine before open_course: paths %v (want draft), decision %+v", st.Paths, st.Decision)
			}
			st = stateAt(t, e, m, opened)
			if !slices.Equal(st.Paths, []string{"open"}) || st.Decision != nil {
				t.Errorf("machine after it opened: paths %v (want open), decision %+v", st.Paths, st.Decision)
			}

			// A decision with a query: each part with what it read.
			s := "courses.seats"
			st = stateAt(t, e, s, reserve-1)
			if st.Decision == nil || st.Decision.Message.Position != reserve || len(st.Decision.Queries) != 3 {
				t.Fatalf("seats before the reservation: decision %+v, want reserve_seat at %d with 3 query parts", st.Decision, reserve)
			}
			q := st.Decision.Queries
			if q[0].Matched != 1 || q[0].Read[0].Position != created || q[0].Conditions[0] != "courses.course_created(course_id=algebra)" {
				t.Errorf("part 0 read %+v, want the course created at %d", q[0], created)
			}
			if q[1].Matched != 2 || q[1].Read[0].Position != enrolled || q[2].Matched != 0 {
				t.Errorf("parts 1 and 2 read %+v and %+v, want the 2 enrolments and no seat", q[1], q[2])
			}
			if len(st.Decision.Produced) != 1 || st.Decision.Produced[0].Position != reserved {
				t.Errorf("the reservation produced %+v", st.Decision.Produced)
			}
			st = stateAt(t, e, s, reserve)
			if st.Decision != nil || !strings.Contains(stateJSON(t, st), `"reserved":0`) {
				t.Errorf("seats after the command: %s, decision %+v", st.State, st.Decision)
			}
			st = stateAt(t, e, s, reserved)
			if !strings.Contains(stateJSON(t, st), `"reserved":1`) || st.Prev != reserve {
				t.Errorf("seats after the reservation: %s prev %d", st.State, st.Prev)
			}
		})
	}
}

// StateAt refuses what it cannot fold, with errors usable with errors.Is.
func TestStateAtRefusals(t *testing.T) {
	e := newEnv(t, stores["memstore"], dashboard.Options{})
	ctx := context.Background()
	for _, c := range []struct {
		q    dashboard.StateQuery
		want error
	}{
		{dashboard.StateQuery{Group: "nope", Partition: algebra}, dashboard.ErrNoReactor},
		{dashboard.StateQuery{Group: "greeting", Partition: algebra}, dashboard.ErrNoReactor},
		{dashboard.StateQuery{Group: "courses.course_decider", Partition: map[string]string{"student_id": "ada"}}, dashboard.ErrBadPartition},
		{dashboard.StateQuery{Group: "courses.course_decider"}, dashboard.ErrBadPartition},
	} {
		if _, err := dashboard.StateAt(ctx, e.store, nil, e.app.Reactors(), c.q); !errors.Is(err, c.want) {
			t.Errorf("%+v: %v, want %v", c.q, err, c.want)
		}
	}
}

// The state page shows the same, links to the steps before and after,
// and is reached from a message's page and a group's partitions.
func TestStatePage(t *testing.T) {
	e := newEnv(t, stores["sqlitestore"], dashboard.Options{})
	reserve := positionOf(t, e.store, "courses.reserve_seat", algebra)
	path := fmt.Sprintf("/groups/courses.seats/state?partition=course_id:algebra&at=%d", reserve-1)
	status, body := e.get(path)
	if status != http.StatusOK {
		t.Fatalf("%s: %d\n%s", path, status, body)
	}
	mustContain(t, body, `class="decision" data-position="`+fmt.Sprint(reserve)+`"`, "courses.course_created(course_id=algebra)",
		`class="query-part" data-part="1" data-matched="2"`, `<ul class="produced">`, `class="step-next"`, `class="step-prev"`, `&#34;reserved&#34;: 0`)
	status, body = e.get("/groups/courses.lifecycle/state?partition=course_id:algebra")
	if status != http.StatusOK {
		t.Fatalf("machine state: %d", status)
	}
	mustContain(t, body, `<code class="path" data-path="open">open</code>`)
	if !regexp.MustCompile(`class="state [^"]*active" data-path="open"`).MatchString(body) {
		t.Error("the machine's chart does not highlight its state open")
	}
	for path, want := range map[string]int{
		"/groups/nope/state?partition=course_id:algebra":                 http.StatusNotFound,
		"/groups/courses.seats/state":                                    http.StatusBadRequest,
		"/groups/courses.seats/state?partition=student_id:ada":           http.StatusBadRequest,
		"/groups/courses.seats/state?partition=course_id:algebra&at=x":   http.StatusBadRequest,
		"/groups/courses.seats/state?partition=course_id:algebra&at=-3":  http.StatusBadRequest,
		"/groups/courses.seats/state?partition=course_id:algebra&at=999": http.StatusOK,
	} {
		if status, body := e.get(path); status != want {
			t.Errorf("%s: %d, want %d\n%.500s", path, status, want, body)
		}
	}
	// From a message: the reactors it concerns, just before it when they
	// handle it.
	res, err := e.store.Read(context.Background(), []core.Condition{{Type: "courses.reserve_seat", Attrs: algebra}}, shell.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, body = e.get("/messages/" + res.Messages[0].ID.String())
	link := regexp.MustCompile(`class="state-link" data-group="courses.seats" href="([^"]+)"`).FindStringSubmatch(body)
	if link == nil {
		t.Fatalf("the message page does not link to the seats' state:\n%s", body)
	}
	u, _ := url.Parse(strings.ReplaceAll(link[1], "&amp;", "&"))
	if u.Query().Get("at") != fmt.Sprint(reserve-1) || u.Query().Get("partition") != "course_id:algebra" {
		t.Errorf("state link %s: want the algebra partition just before %d", link[1], reserve)
	}
	// From a group's partitions: a decider's at the partition's last
	// message (its events come after its offset), a projector's at its
	// offset (what it processed).
	_, body = e.get("/groups/courses.seats")
	mustContain(t, body, `class="state-link" href="/groups/courses.seats/state?partition=course_id%3Aalgebra"`)
	_, body = e.get("/groups/courses.catalog")
	offs, err := e.store.ReadOffsets(context.Background(), shell.OffsetQuery{Group: "courses.catalog"})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range offs.Offsets {
		mustContain(t, body, fmt.Sprintf(`class="state-link" href="/groups/courses.catalog/state?at=%d&amp;partition=%s"`, o.LastPosition, url.QueryEscape(core.Partition(o.Partition).String())))
	}
}
