package dashboard_test

import (
	"context"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"zombiezen.com/go/sqlite/sqlitex"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/core/durable"
	"github.com/sourced-go/sourced/shell"
	"github.com/sourced-go/sourced/shell/dashboard"
	"github.com/sourced-go/sourced/shell/dashboard/internal/demo"
	"github.com/sourced-go/sourced/shell/sqlitestore"
	"github.com/sourced-go/sourced/shell/workflow"
)

// spoil rewrites the stored payload of the message at position to one
// its type no longer decodes (a field of another JSON type), as a
// payload struct changed without an upcaster, or a payload nested past
// the decoder's depth, would leave it.
func spoil(t *testing.T, s shell.Store, position int64, payload string) {
	t.Helper()
	err := s.Update(context.Background(), func(tx shell.Tx) error {
		conn, err := sqlitestore.Conn(tx)
		if err != nil {
			return err
		}
		return sqlitex.Execute(conn, `UPDATE sourced_messages SET payload = ? WHERE position = ?`, &sqlitex.ExecOptions{Args: []any{payload, position}})
	})
	if err != nil {
		t.Fatal(err)
	}
}

// A page that meets a message the store cannot decode shows it as such,
// its position, type and the error, and the rest of the page around it,
// instead of answering 500 (issue 30, item 5).
func TestPagesShowAnUndecodableMessage(t *testing.T) {
	e := newEnv(t, stores["sqlitestore"], dashboard.Options{})
	ctx := context.Background()
	// A second run of the greeting, whose start is then spoiled.
	if _, err := workflow.Start(ctx, e.store, e.app.Greeting, "Bob", workflow.WithID("greet-bob")); err != nil {
		t.Fatal(err)
	}
	started := durable.TypesOf("greeting").WorkflowStarted
	page, err := e.store.ReadAll(ctx, shell.ReadAllOptions{Conditions: []core.Condition{{Type: started, Attrs: map[string]string{"workflow_id": "greet-bob"}}}})
	if err != nil || len(page.Messages) != 1 {
		t.Fatalf("the run's start: %v, %v", page.Messages, err)
	}
	bad := page.Messages[0]
	all, err := e.store.ReadAll(ctx, shell.ReadAllOptions{Limit: 500})
	if err != nil {
		t.Fatal(err)
	}
	spoil(t, e.store, bad.Position, `{"workflow_id": 7}`)
	if _, err := e.store.ReadAll(ctx, shell.ReadAllOptions{Limit: 500}); err == nil {
		t.Fatal("the spoiled message still decodes")
	}
	row := regexp.MustCompile(`<tr class="message undecodable" data-type="` + regexp.QuoteMeta(started) + `" data-position="` + strconv.FormatInt(bad.Position, 10) + `">.*cannot be decoded</strong>: [^<]*workflow_id`)

	for _, path := range []string{"/log?limit=500", "/log?limit=500&dir=newer", "/log?type=" + started, "/log?limit=3&from=" + strconv.FormatInt(bad.Position+1, 10)} {
		status, body := e.get(path)
		if status != http.StatusOK || !row.MatchString(body) {
			t.Errorf("%s: %d, want the undecodable message shown as such:\n%s", path, status, body)
			continue
		}
		if path == "/log?limit=500" || path == "/log?limit=500&dir=newer" {
			if n := strings.Count(body, `<tr class="message`); n != len(all.Messages) {
				t.Errorf("%s: %d messages shown, want all %d", path, n, len(all.Messages))
			}
		}
	}
	// A page of 3 from just after it: the message after, it, the one before.
	_, body := e.get("/log?limit=3&from=" + strconv.FormatInt(bad.Position+1, 10))
	if n := strings.Count(body, `<tr class="message`); n != 3 || !strings.Contains(body, `class="older"`) {
		t.Errorf("a page of 3 around the undecodable message: %d rows, older link %v", n, strings.Contains(body, `class="older"`))
	}

	status, body := e.get("/workflows")
	if status != http.StatusOK || !row.MatchString(body) || !strings.Contains(body, "greet-ada") {
		t.Errorf("/workflows: %d, want the runs and the undecodable start:\n%s", status, body)
	}
	if status, body := e.get("/workflows/greeting/greet-ada"); status != http.StatusOK {
		t.Errorf("another run's page: %d\n%s", status, body)
	}
	if status, body := e.get("/workflows/greeting/greet-bob"); status != http.StatusNotFound || !strings.Contains(body, "cannot decode") {
		t.Errorf("the run whose start cannot be decoded: %d, want 404 saying so\n%s", status, body)
	}
	// A scheduled message that cannot be decoded: the list says so.
	later := core.NewMessage(demo.CloseCourse{CourseID: "algebra"}).At(e.store.Now().Add(time.Hour))
	res, err := e.store.Append(ctx, []core.Message{later}, shell.AppendOptions{})
	if err != nil {
		t.Fatal(err)
	}
	err = e.store.Update(ctx, func(tx shell.Tx) error {
		conn, err := sqlitestore.Conn(tx)
		if err != nil {
			return err
		}
		return sqlitex.Execute(conn, `UPDATE sourced_scheduled_messages SET payload = '{"course_id": 7}' WHERE message_id = ?`, &sqlitex.ExecOptions{Args: []any{res.Messages[0].ID.String()}})
	})
	if err != nil {
		t.Fatal(err)
	}
	if status, body := e.get("/scheduled"); status != http.StatusOK || !strings.Contains(body, "A scheduled message cannot be decoded") || !strings.Contains(body, "courses.close_course") {
		t.Errorf("/scheduled: %d, want the undecodable message named\n%s", status, body)
	}
	status, body = e.get("/messages/" + bad.ID.String())
	if status != http.StatusOK || !strings.Contains(body, "cannot be decoded") || !strings.Contains(body, started) {
		t.Errorf("the message's page: %d, want it shown as undecodable\n%s", status, body)
	}
}

// A partition's state cannot be folded past a message the store cannot
// decode: the state page says which message, with 422, instead of 500.
func TestStatePageNamesAnUndecodableMessage(t *testing.T) {
	e := newEnv(t, stores["sqlitestore"], dashboard.Options{})
	res, err := e.store.Read(context.Background(), []core.Condition{{Type: "courses.course_created", Attrs: map[string]string{"course_id": "algebra"}}}, shell.ReadOptions{})
	if err != nil || len(res.Messages) != 1 {
		t.Fatalf("the course created: %v %v", res.Messages, err)
	}
	spoil(t, e.store, res.Messages[0].Position, `{"course_id": "algebra", "title": 7}`)
	status, body := e.get("/groups/courses.course_decider/state?partition=course_id:algebra")
	if status != http.StatusUnprocessableEntity || !strings.Contains(body, "cannot decode") || !strings.Contains(body, "courses.course_created at position "+strconv.FormatInt(res.Messages[0].Position, 10)) {
		t.Errorf("the state of a partition with an undecodable message: %d, want 422 naming it\n%s", status, body)
	}
}
