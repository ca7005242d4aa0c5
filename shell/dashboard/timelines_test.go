package dashboard_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell"
	"github.com/sourced-go/sourced/shell/dashboard"
	"github.com/sourced-go/sourced/shell/dashboard/internal/demo"
)

var svgRe = regexp.MustCompile(`(?s)<svg class="timeline-svg"[^>]*>.*?</svg>`)

// charts returns the timeline charts of a page by their data-chart id,
// each with its number of points.
func charts(t *testing.T, body string) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, m := range regexp.MustCompile(`<figure class="timeline" data-chart="([a-z]+)">\s*<svg class="timeline-svg"[^>]*data-points="(\d+)"`).FindAllStringSubmatch(body, -1) {
		n, _ := strconv.Atoi(m[2])
		out[m[1]] = n
	}
	return out
}

// The groups page and a group's page chart lag, throughput, contention
// and failures over time: with no runtime heard (no Recorder) the
// observed series are empty and the page says so; with a Recorder fed by
// the runtime's observer, they draw what it observed, with the hottest
// partitions. The SVG is drawn on the server, with a fixed viewBox and no
// inline style or script (the CSP stays strict).
func TestChartsOnTheGroupsPages(t *testing.T) {
	e := newEnv(t, stores["sqlitestore"], dashboard.Options{})
	status, body := e.get("/")
	if status != http.StatusOK {
		t.Fatalf("/: %d", status)
	}
	got := charts(t, body)
	if len(got) != 4 || got["throughput"] != 0 || got["contention"] != 0 {
		t.Errorf("charts without a recorder: %v; want 4, the observed ones empty", got)
	}
	mustContain(t, body, "no data yet", "hears no runtime (dashboard.Options.Recorder)")
	// The page's own samples: the lag and the log's position, once per
	// render.
	_, body = e.get("/")
	if got := charts(t, body); got["lag"] == 0 {
		t.Errorf("the lag is not sampled from the store: %v", got)
	}

	rec := dashboard.NewRecorder(dashboard.RecorderOptions{})
	app := demo.New()
	store := stores["sqlitestore"](t, app)
	router, err := shell.NewRouter(store, shell.RouterOptions{Observer: rec}, app.Reactors()...)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := router.Setup(ctx); err != nil {
		t.Fatal(err)
	}
	for i := range 30 {
		if _, err := store.Append(ctx, core.Messages(demo.CreateCourse{CourseID: fmt.Sprintf("c%d", i%3), Title: "T"}), shell.AppendOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := router.Drain(ctx, &shell.DrainOptions{TolerateFailures: true}); err != nil {
		t.Fatal(err)
	}
	// A group with no reactor of the dashboard's (another process's):
	// its hot partitions are listed, not linked to a state.
	for range 100 {
		rec.Observe(ctx, shell.Claimed{Group: "other.group", Partition: map[string]string{"k": "v"}})
	}
	e2 := serve(t, store, app, dashboard.Options{Recorder: rec})
	for _, path := range []string{"/", "/groups/courses.course_decider", "/?window=1h", "/groups/courses.course_decider?window=3h"} {
		status, body := e2.get(path)
		if status != http.StatusOK {
			t.Fatalf("%s: %d\n%s", path, status, body)
		}
		got := charts(t, body)
		if got["throughput"] == 0 || got["contention"] == 0 || got["failures"] == 0 {
			t.Errorf("%s: charts %v; want the observed series drawn", path, got)
		}
		if strings.Contains(body, "hears no runtime") {
			t.Errorf("%s says it hears no runtime", path)
		}
		for _, svg := range svgRe.FindAllString(body, -1) {
			if !strings.Contains(svg, `viewBox="0 0 320 120"`) || strings.Contains(svg, "style=") || strings.Contains(svg, "<script") || strings.Contains(svg, "href") {
				t.Errorf("%s: a chart's SVG has no fixed viewBox, or has inline style, script or links: %.300s", path, svg)
			}
			if n := strings.Count(svg, ","); n > 2*4*144 {
				t.Errorf("%s: a chart of %d points", path, n)
			}
		}
		// The deciders' partitions course_id:c0..c2 were claimed: the
		// hottest partitions list them, linked to their time travel.
		mustContain(t, body, `class="hot-partition"`, `course_id:c0`)
		if !strings.Contains(body, `href="/groups/courses.course_decider/state?partition=course_id%3Ac0"`) {
			t.Errorf("%s: a hot partition does not link to its state", path)
		}
	}
	_, body = e2.get("/")
	row := regexp.MustCompile(`(?s)<tr class="hot-partition" data-group="other.group".*?</tr>`).FindString(body)
	if row == "" || strings.Contains(row, "state-link") {
		t.Errorf("the hot partition of a group without a reactor: %q, want it listed without a state link", row)
	}
	_, body = e2.get("/?window=3h")
	mustContain(t, body, `data-window="3h"`, `<a href="/?window=3h" class="current"`)
	_, body = e2.get("/?window=forever")
	mustContain(t, body, `data-window="10m"`)
}

// serve serves store's dashboard with the app's reactors.
func serve(t *testing.T, store shell.Store, app *demo.App, opts dashboard.Options) *env {
	t.Helper()
	opts.Reactors = app.Reactors()
	d, err := dashboard.New(store, opts)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/", d)
	e := &env{t: t, store: store, app: app}
	e.srv = httptest.NewServer(mux)
	t.Cleanup(e.srv.Close)
	return e
}
