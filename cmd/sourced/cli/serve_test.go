package cli

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell"
)

// catalog is a projector of the fixture's courses, for the topology.
var catalog = core.Projector[int]{Group: "courses.catalog", Label: "Catalog", PartitionBy: []string{"course_id"}}.With(
	core.Evolve(func(n int, _ CourseCreated) int { return n + 1 }),
	core.React(func(_ int, e CourseCreated) []any { return []any{Reminder{CourseID: e.CourseID}} }).Emits(Reminder{}),
)

func TestTopologyNeedsTheApplicationsReactors(t *testing.T) {
	_, errOut, code := cli(t, "topology")
	if code != 1 || !strings.Contains(errOut, "cli.WithReactors") {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	var out, stderr bytes.Buffer
	drv := WithReactors(SQLite(), registryForTest(t), catalog)
	if code := Run(context.Background(), []string{"topology", "-format", "mermaid"}, &out, &stderr, drv); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	for _, want := range []string{"flowchart LR", `readmodel_courses_catalog[("Catalog")]:::readmodel`, `event_courses_created("courses.created"):::event`, "event_courses_created --> automation_courses_catalog_reaction_courses_created_"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("mermaid lacks %q:\n%s", want, out.String())
		}
	}
	out.Reset()
	if code := Run(context.Background(), []string{"topology"}, &out, &stderr, drv); code != 0 || !strings.Contains(out.String(), `"type": "readmodel"`) {
		t.Errorf("json: exit %d\n%s", code, out.String())
	}
	if code := Run(context.Background(), []string{"topology", "-format", "dot"}, &out, &stderr, drv); code != 2 {
		t.Errorf("-format dot: exit %d", code)
	}
}

// A live stream open while stopping does not hold serve's shutdown.
func TestServeStopsWithALiveStreamOpen(t *testing.T) {
	db := fixture(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errOut syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- Run(ctx, []string{"-db", db, "serve", "-addr", "127.0.0.1:0", "-read-only"}, &out, &errOut, SQLite())
	}()
	var url string
	for deadline := time.Now().Add(20 * time.Second); url == "" && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if m := regexp.MustCompile(`http://[0-9.:]+/`).FindString(out.String()); m != "" {
			url = m
		}
		select {
		case code := <-done:
			t.Fatalf("serve exited %d: %s", code, errOut.String())
		default:
		}
	}
	if url == "" {
		t.Fatalf("no address printed: %q", out.String())
	}
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK || !strings.Contains(string(body), `data-group="courses.catalog"`) || !strings.Contains(string(body), "read-only") {
		t.Errorf("GET /: %d\n%s", res.StatusCode, body)
	}
	// A live stream open while stopping does not hold the shutdown.
	live, err := http.Get(url + "live")
	if err != nil {
		t.Fatal(err)
	}
	defer live.Body.Close()
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("serve exited %d: %s", code, errOut.String())
		}
	case <-time.After(4 * time.Second):
		t.Fatal("serve did not stop within 4 s of its context")
	}
}

// DNS rebinding: a page of another site whose name resolves to the
// loopback address reaches serve with its own name as Host (and Origin):
// serve answers only to the loopback names and the address it serves.
func TestServeRefusesAForeignHost(t *testing.T) {
	db := fixture(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errOut syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- Run(ctx, []string{"-db", db, "serve", "-addr", "127.0.0.1:0"}, &out, &errOut, SQLite())
	}()
	defer func() { cancel(); <-done }()
	var base string
	for deadline := time.Now().Add(20 * time.Second); base == "" && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		base = regexp.MustCompile(`http://[0-9.:]+/`).FindString(out.String())
	}
	if base == "" {
		t.Fatalf("no address printed: %q", out.String())
	}
	port := regexp.MustCompile(`:(\d+)/$`).FindStringSubmatch(base)[1]
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	send := func(method, path, host string) int {
		req, _ := http.NewRequest(method, base+path, nil)
		req.Host = host
		if method == "POST" {
			req.Header.Set("Origin", "http://"+host)
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		res, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		return res.StatusCode
	}
	for _, host := range []string{"127.0.0.1:" + port, "localhost:" + port} {
		if code := send("GET", "", host); code != http.StatusOK {
			t.Errorf("GET / with Host %s: %d, want 200", host, code)
		}
	}
	for _, host := range []string{"evil.example:" + port, "rebind.evil.example"} {
		if code := send("GET", "", host); code != http.StatusMisdirectedRequest {
			t.Errorf("GET / with Host %s: %d, want 421", host, code)
		}
		if code := send("POST", "groups/courses.catalog/stop", host); code != http.StatusMisdirectedRequest {
			t.Errorf("POST stop with Host and Origin %s: %d, want 421", host, code)
		}
	}
}

// 'topology -observe N' sets what the log caused beside what the handlers
// declare, and flags the differences.
func TestTopologyObservesTheLog(t *testing.T) {
	ctx := context.Background()
	db, s := emptyStore(t)
	created := core.NewMessage(CourseCreated{CourseID: "c1", CourseName: "Algebra"})
	res, err := s.Append(ctx, []core.Message{created}, shell.AppendOptions{})
	if err != nil {
		t.Fatal(err)
	}
	reminder := core.NewMessage(Reminder{CourseID: "c1"}).Correlate(res.Messages[0]).WithMetadata(map[string]any{"producer": "courses.catalog"})
	res, err = s.Append(ctx, []core.Message{reminder}, shell.AppendOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Nothing declares that a reminder causes a course.
	odd := core.NewMessage(CourseCreated{CourseID: "c2", CourseName: "History"}).Correlate(res.Messages[0])
	if _, err := s.Append(ctx, []core.Message{odd}, shell.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	drv := WithReactors(SQLite(), registryForTest(t), catalog)
	var out, stderr bytes.Buffer
	if code := Run(ctx, []string{"-db", db, "topology", "-format", "mermaid", "-observe", "100"}, &out, &stderr, drv); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	for _, want := range []string{`automation_courses_catalog_reaction_courses_created_ -->|"1 seen"| event_courses_reminder`, `event_courses_reminder ==>|"undeclared, 1 seen"| event_courses_created`} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("mermaid lacks %q:\n%s", want, out.String())
		}
	}
	if !strings.Contains(stderr.String(), "undeclared: courses.reminder -> courses.created") {
		t.Errorf("stderr: %q", stderr.String())
	}
	out.Reset()
	if code := Run(ctx, []string{"-db", db, "topology", "-observe", "100"}, &out, &stderr, drv); code != 0 || !strings.Contains(out.String(), `"status": "undeclared"`) || !strings.Contains(out.String(), `"observed": {`) {
		t.Errorf("json: exit %d\n%s", code, out.String())
	}
	if code := Run(ctx, []string{"-db", db, "topology", "-observe", "-1"}, &out, &stderr, drv); code != 2 {
		t.Errorf("-observe -1: exit %d", code)
	}
}
