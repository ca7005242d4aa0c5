package dashboard_test

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell"
	"github.com/sourced-go/sourced/shell/dashboard"
	"github.com/sourced-go/sourced/shell/dashboard/internal/demo"
	"github.com/sourced-go/sourced/shell/memstore"
	"github.com/sourced-go/sourced/shell/sqlitestore"
)

type env struct {
	t     *testing.T
	store shell.Store
	srv   *httptest.Server
	app   *demo.App
}

// stores are the stores the dashboard is tested on.
var stores = map[string]func(t *testing.T, app *demo.App) shell.Store{
	"memstore": func(t *testing.T, app *demo.App) shell.Store { return memstore.New(app.Registry) },
	"sqlitestore": func(t *testing.T, app *demo.App) shell.Store {
		s, err := sqlitestore.Install(context.Background(), filepath.Join(t.TempDir(), "dash.db"), sqlitestore.Options{Registry: app.Registry})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	},
}

func newEnv(t *testing.T, store func(*testing.T, *demo.App) shell.Store, opts dashboard.Options) *env {
	t.Helper()
	app := demo.New()
	s := store(t, app)
	if _, err := app.Seed(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	opts.Reactors = app.Reactors()
	d, err := dashboard.New(s, opts)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	prefix := opts.Prefix
	mux.Handle(prefix+"/", d)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return &env{t: t, store: s, srv: srv, app: app}
}

func (e *env) get(path string) (int, string) {
	e.t.Helper()
	res, err := http.Get(e.srv.URL + path)
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

func (e *env) post(path string, form url.Values) (int, string) {
	e.t.Helper()
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := client.PostForm(e.srv.URL+path, form)
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

func mustContain(t *testing.T, body string, wants ...string) {
	t.Helper()
	failed := false
	for _, w := range wants {
		if !strings.Contains(body, w) {
			t.Errorf("page lacks %q", w)
			failed = true
		}
	}
	if failed && testing.Verbose() {
		t.Logf("page:\n%s", body)
	}
}

func TestPagesRenderWithData(t *testing.T) {
	for name, store := range stores {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, store, dashboard.Options{})
			pages := map[string][]string{
				"/": {`data-group="courses.enrolment_decider" data-status="active"`, `data-group="courses.search_index" data-status="retrying"`,
					"search service unreachable: connection refused", `class="action action-stop"`},
				"/groups/courses.catalog":       {"Partitions (2)", "course_id:algebra", "course_id:poetry"},
				"/partitions":                   {"courses.welcomes", "student_id:grace"},
				"/log":                          {`data-type="courses.create_course"`, `data-type="courses.welcome_sent"`},
				"/scheduled":                    {`data-type="courses.close_course"`},
				"/topology":                     {`class="em-node em-command"`, `data-id="event:courses.student_enrolled"`, "Events: Enrolments", "Declared and observed", `<tr data-flow-status="confirmed"><td>confirmed</td><td>command:courses.enrolment_decider:courses.enrol_student</td><td>courses.enrol_student</td><td>courses.student_enrolled</td>`, `class="em-edge em-confirmed"`},
				"/machines":                     {"Course lifecycle"},
				"/machines/courses.lifecycle":   {`data-path="draft"`, `data-path="open"`, "course_id:algebra"},
				"/workflows":                    {`data-workflow="greeting"`, "greet-ada", `data-status="complete"`},
				"/workflows/greeting/greet-ada": {"compose", "send", "hello Ada!"},
			}
			for path, wants := range pages {
				status, body := e.get(path)
				if status != http.StatusOK {
					t.Errorf("GET %s: %d\n%s", path, status, body)
					continue
				}
				mustContain(t, body, wants...)
			}
		})
	}
}

func TestLogFiltersAndPaging(t *testing.T) {
	e := newEnv(t, stores["memstore"], dashboard.Options{})
	_, body := e.get("/log?type=courses.student_enrolled&where=course_id%3Dalgebra")
	if n := strings.Count(body, `class="message"`); n != 2 {
		t.Errorf("filtered log shows %d messages, want 2 (ada and alan)", n)
	}
	mustContain(t, body, "ada", "alan")
	if strings.Contains(body, "grace") {
		t.Error("the filter let a poetry enrolment through")
	}
	// An attribute without a type is refused with a message saying why.
	status, body := e.get("/log?where=course_id%3Dalgebra")
	if status != http.StatusBadRequest || !strings.Contains(body, "needs a message type") {
		t.Errorf("attribute without type: %d", status)
	}
	status, _ = e.get("/log?where=nonsense&type=courses.student_enrolled")
	if status != http.StatusBadRequest {
		t.Errorf("malformed attribute: %d", status)
	}
	// Paging both ways: two per page from the newest.
	_, first := e.get("/log?limit=2")
	older := regexp.MustCompile(`class="older" href="([^"]+)"`).FindStringSubmatch(first)
	if older == nil || strings.Contains(first, `class="newer"`) {
		t.Fatalf("first page links: older %v, newer present %v", older, strings.Contains(first, `class="newer"`))
	}
	_, second := e.get(strings.ReplaceAll(older[1], "&amp;", "&"))
	newer := regexp.MustCompile(`class="newer" href="([^"]+)"`).FindStringSubmatch(second)
	if newer == nil {
		t.Fatal("the second page has no link back to newer messages")
	}
	_, back := e.get(strings.ReplaceAll(newer[1], "&amp;", "&"))
	positions := func(s string) []string {
		var out []string
		for _, m := range regexp.MustCompile(`data-position="(\d+)"`).FindAllStringSubmatch(s, -1) {
			out = append(out, m[1])
		}
		return out
	}
	if p1, p3 := positions(first), positions(back); strings.Join(p1, ",") != strings.Join(p3, ",") || len(p1) != 2 {
		t.Errorf("newer from the second page gives %v, the first page was %v", p3, p1)
	}
	if p1, p2 := positions(first), positions(second); len(p2) != 2 || p2[0] >= p1[1] && len(p2[0]) >= len(p1[1]) {
		t.Errorf("pages overlap: %v then %v", p1, p2)
	}
}

func TestMessageDetailAndTrace(t *testing.T) {
	e := newEnv(t, stores["memstore"], dashboard.Options{})
	_, body := e.get("/log?type=courses.enrol_student&where=student_id%3Dada")
	m := regexp.MustCompile(`href="(/messages/[0-9a-f-]+)"`).FindStringSubmatch(body)
	if m == nil {
		t.Fatal("no message link")
	}
	status, detail := e.get(m[1])
	if status != http.StatusOK {
		t.Fatalf("detail: %d", status)
	}
	// The command caused the event, which caused the welcome command and
	// its event: a tree four deep.
	mustContain(t, detail, `&#34;student_id&#34;: &#34;ada&#34;`, "Trace (4 messages)", "courses.enrol_student", "courses.welcome_sent", `trace-node current`)
	if strings.Count(detail, "<ul>") < 3 {
		t.Errorf("the trace is not nested: %d nested lists", strings.Count(detail, "<ul>"))
	}
	if status, _ := e.get("/messages/not-a-uuid"); status != http.StatusBadRequest {
		t.Errorf("bad id: %d", status)
	}
	if status, _ := e.get("/messages/0195c0c0-0000-7000-8000-000000000000"); status != http.StatusNotFound {
		t.Errorf("unknown id: %d", status)
	}
}

func TestOperatorActionChangesStatus(t *testing.T) {
	e := newEnv(t, stores["sqlitestore"], dashboard.Options{})
	ctx := context.Background()
	status, _ := e.post("/groups/courses.catalog/stop", url.Values{"back": {"/"}})
	if status != http.StatusSeeOther {
		t.Fatalf("stop: %d", status)
	}
	g, _ := e.store.Group(ctx, "courses.catalog")
	if g.Status != shell.StatusStopped {
		t.Fatalf("status after stop: %s", g.Status)
	}
	_, body := e.get("/")
	mustContain(t, body, `data-group="courses.catalog" data-status="stopped"`)
	// Stop is no longer accepted: the button is disabled, and posting it
	// anyway is refused, changing nothing.
	row := body[strings.Index(body, `data-group="courses.catalog"`):]
	row = row[:strings.Index(row, "</tr>")]
	if !regexp.MustCompile(`action-stop" name="action" value="stop" disabled`).MatchString(row) {
		t.Errorf("stop button not disabled for a stopped group:\n%s", row)
	}
	if status, _ := e.post("/groups/courses.catalog/stop", nil); status != http.StatusConflict {
		t.Errorf("stopping a stopped group: %d", status)
	}
	if status, _ := e.post("/groups/courses.catalog/start", nil); status != http.StatusSeeOther {
		t.Errorf("start: %d", status)
	}
	if g, _ := e.store.Group(ctx, "courses.catalog"); g.Status != shell.StatusActive {
		t.Errorf("status after start: %s", g.Status)
	}
	// Retry: the failed search index, retried now.
	if status, _ := e.post("/groups/courses.search_index/retry", nil); status != http.StatusSeeOther {
		t.Errorf("retry: %d", status)
	}
	if g, _ := e.store.Group(ctx, "courses.search_index"); !g.RetryAt.Equal(e.store.Now()) && g.RetryAt.After(e.store.Now()) {
		t.Errorf("retry at %v, want now", g.RetryAt)
	}
	if status, _ := e.post("/groups/nope/stop", nil); status != http.StatusNotFound {
		t.Errorf("unknown group: %d", status)
	}
	if status, _ := e.post("/groups/courses.catalog/explode", nil); status != http.StatusNotFound {
		t.Errorf("unknown action: %d", status)
	}
}

func TestReadOnlyRefusesActions(t *testing.T) {
	e := newEnv(t, stores["memstore"], dashboard.Options{ReadOnly: true})
	_, body := e.get("/")
	if strings.Contains(body, `class="action`) {
		t.Error("read-only page shows action buttons")
	}
	mustContain(t, body, "read-only")
	if status, _ := e.post("/groups/courses.catalog/stop", nil); status != http.StatusForbidden {
		t.Errorf("read-only stop: %d", status)
	}
	if g, _ := e.store.Group(context.Background(), "courses.catalog"); g.Status != shell.StatusActive {
		t.Errorf("read-only stop changed the status to %s", g.Status)
	}
}

func TestCrossSiteActionRefused(t *testing.T) {
	e := newEnv(t, stores["memstore"], dashboard.Options{})
	req, _ := http.NewRequest(http.MethodPost, e.srv.URL+"/groups/courses.catalog/stop", nil)
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusForbidden {
		t.Errorf("cross-site post: %d", res.StatusCode)
	}
	if g, _ := e.store.Group(context.Background(), "courses.catalog"); g.Status != shell.StatusActive {
		t.Errorf("cross-site stop changed the status to %s", g.Status)
	}
}

func TestMountedUnderAPrefix(t *testing.T) {
	e := newEnv(t, stores["memstore"], dashboard.Options{Prefix: "/ops"})
	status, body := e.get("/ops/")
	if status != http.StatusOK {
		t.Fatalf("GET /ops/: %d", status)
	}
	mustContain(t, body, `href="/ops/log"`, `src="/ops/static/app.js"`, `action="/ops/groups/courses.catalog/stop"`)
	if status, _ := e.get("/ops/static/app.css"); status != http.StatusOK {
		t.Errorf("static asset: %d", status)
	}
}

func TestMachineInstanceHighlighted(t *testing.T) {
	e := newEnv(t, stores["memstore"], dashboard.Options{})
	_, body := e.get("/machines/courses.lifecycle?partition=course_id:algebra")
	mustContain(t, body, `active" data-path="open"`, "courses.lifecycle.runtime.open")
	if strings.Contains(body, `active" data-path="draft"`) {
		t.Error("draft still highlighted after the course opened")
	}
	_, body = e.get("/machines/courses.lifecycle?partition=student_id:x")
	mustContain(t, body, "write key:value pairs")
	if status, _ := e.get("/machines/nope"); status != http.StatusNotFound {
		t.Errorf("unknown machine: %d", status)
	}
}

func TestLagWorkersAndParkedPartitions(t *testing.T) {
	e := newEnv(t, stores["sqlitestore"], dashboard.Options{})
	ctx := context.Background()
	// The search index retries: its two partitions have pending work.
	_, body := e.get("/")
	row := body[strings.Index(body, `data-group="courses.search_index"`):]
	row = row[:strings.Index(row, "</tr>")]
	if !regexp.MustCompile(`class="num lag">3 <small>in 2</small>`).MatchString(row) {
		t.Errorf("search index lag not shown as 3 in 2 partitions:\n%s", row)
	}
	mustContain(t, body, "1 parked")
	_, body = e.get("/partitions")
	mustContain(t, body, `data-worker="demo-worker-1"`, `data-worker="demo-worker-2"`,
		`class="parked-partition" data-group="courses.welcomes" data-partition="student_id:grace"`, "mailbox grace@example.com does not exist")
	// Skip the parked partition's failed message: it is unparked.
	// The forms post the partition's text (core.Partition's String), which
	// ParsePartition reads back whatever its values hold.
	mustContain(t, body, `name="partition" value="student_id:grace"`)
	status, _ := e.post("/parked/skip", url.Values{"group": {"courses.welcomes"}, "partition": {`{"student_id":"grace"}`}, "back": {"/partitions"}})
	if status != http.StatusSeeOther {
		t.Fatalf("skip: %d", status)
	}
	if ps, _ := e.store.ParkedPartitions(ctx, "courses.welcomes"); len(ps) != 0 {
		t.Errorf("still parked after skip: %+v", ps)
	}
	// Again: not parked any more, refused, nothing changes.
	if status, body := e.post("/parked/skip", url.Values{"group": {"courses.welcomes"}, "partition": {"student_id:grace"}}); status != http.StatusConflict || !strings.Contains(body, "not parked") {
		t.Errorf("skip of an unparked partition: %d", status)
	}
	if status, _ := e.post("/parked/skip", url.Values{"group": {"courses.welcomes"}, "partition": {"no colon"}}); status != http.StatusBadRequest {
		t.Errorf("malformed partition: %d", status)
	}
}

func TestLiveStreamsAppends(t *testing.T) {
	e := newEnv(t, stores["sqlitestore"], dashboard.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, e.srv.URL+"/live", nil)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if ct := res.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	r := bufio.NewReader(res.Body)
	if line, err := r.ReadString('\n'); err != nil || !strings.HasPrefix(line, ": live") {
		t.Fatalf("first line %q, %v", line, err)
	}
	if _, err := e.store.Append(ctx, core.Messages(demo.CreateCourse{CourseID: "chemistry", Title: "Chemistry"}), shell.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("no append event: %v", err)
		}
		if strings.HasPrefix(line, "data: ") {
			if !strings.Contains(line, "courses.create_course") {
				t.Errorf("event data %q", line)
			}
			return
		}
	}
}

func TestRetryStartsAFailedGroup(t *testing.T) {
	e := newEnv(t, stores["memstore"], dashboard.Options{})
	ctx := context.Background()
	if err := e.store.FailGroup(ctx, "courses.catalog", shell.Failure{Error: "boom", ErrorType: "*errors.errorString"}); err != nil {
		t.Fatal(err)
	}
	_, body := e.get("/")
	row := body[strings.Index(body, `data-group="courses.catalog"`):]
	row = row[:strings.Index(row, "</tr>")]
	if strings.Contains(row, `value="retry" disabled`) || !strings.Contains(row, `data-status="failed"`) {
		t.Errorf("retry disabled on a failed group:\n%s", row)
	}
	if status, _ := e.post("/groups/courses.catalog/retry", nil); status != http.StatusSeeOther {
		t.Fatalf("retry: %d", status)
	}
	if g, _ := e.store.Group(ctx, "courses.catalog"); g.Status != shell.StatusActive {
		t.Errorf("status after retrying a failed group: %s", g.Status)
	}
	// An active group has nothing to retry.
	if status, _ := e.post("/groups/courses.catalog/retry", nil); status != http.StatusConflict {
		t.Errorf("retrying an active group: %d", status)
	}
}
