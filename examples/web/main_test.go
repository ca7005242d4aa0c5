package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/sourced-go/sourced/shell/sourced"
)

func quiet() sourced.Config {
	cfg := sourced.DefaultConfig()
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	return cfg
}

func call(t *testing.T, client *http.Client, method, url, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewBufferString(body))
	if err != nil {
		t.Fatal(err)
	}
	res, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var out map[string]any
	if err := json.NewDecoder(res.Body).Decode(&out); err != nil {
		t.Fatalf("%s %s: body is not JSON: %v", method, url, err)
	}
	return res.StatusCode, out
}

// countTypes counts the log's messages by type.
func countTypes(t *testing.T, store sourced.Store) map[string]int {
	t.Helper()
	counts := map[string]int{}
	for m, err := range store.All(context.Background(), sourced.ReadAllOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		counts[m.Type]++
	}
	return counts
}

func TestWebEndToEnd(t *testing.T) {
	ctx := context.Background()
	app, err := Open(ctx, filepath.Join(t.TempDir(), "web.db"), quiet())
	if err != nil {
		t.Fatal(err)
	}
	if err := app.Runtime.Start(ctx); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(app.Routes())
	defer func() {
		srv.Close()
		if err := Shutdown(ctx, nil, app); err != nil {
			t.Error(err)
		}
	}()
	c := srv.Client()
	steps := []struct {
		method, path, body string
		status             int
		says               string
	}{
		{"POST", "/courses", `{"course_id":"c1","course_name":"Algebra","capacity":2}`, 201, "courses.course_created"},
		{"POST", "/courses", `{"course_id":"c2","course_name":"Algebra"}`, 409, `course name "Algebra" is taken`},
		{"POST", "/courses", `{"course_id":"c3"}`, 400, "course_name"},
		{"POST", "/courses", `{"course_id":"c3","course_name":""}`, 400, "is required"},
		{"POST", "/courses", `not json`, 400, "not a valid JSON command"},
		{"POST", "/courses/c1/students", `{"student_id":"ada"}`, 201, "courses.student_enrolled"},
		{"POST", "/courses/c1/students", `{"student_id":"ada"}`, 409, "already enrolled"},
		{"POST", "/courses/c1/students", `{"student_id":"grace"}`, 201, "courses.student_enrolled"},
		{"POST", "/courses/c1/students", `{"student_id":"alan"}`, 409, "is full"},
		{"POST", "/courses/c9/students", `{"student_id":"ada"}`, 404, "no such course"},
		{"POST", "/courses/c1/students", `{}`, 400, "student_id"},
		{"GET", "/courses/c9", ``, 404, "no such course"},
	}
	for _, s := range steps {
		status, body := call(t, c, s.method, srv.URL+s.path, s.body)
		text := fmt.Sprint(body)
		if status != s.status || !bytes.Contains([]byte(text), []byte(s.says)) {
			t.Fatalf("%s %s %s: %d %s, want %d saying %q", s.method, s.path, s.body, status, text, s.status, s.says)
		}
	}
	// The read model catches up in the background: the roster with both
	// students, welcomed by the reaction's workers.
	if err := app.Runtime.WaitIdle(ctx, 0); err != nil {
		t.Fatal(err)
	}
	status, body := call(t, c, "GET", srv.URL+"/courses/c1", "")
	want := map[string]any{"course_id": "c1", "name": "Algebra", "capacity": 2.0, "students": []any{"ada", "grace"}, "welcomed": []any{"ada", "grace"}}
	if status != 200 || fmt.Sprint(body) != fmt.Sprint(want) {
		t.Fatalf("GET /courses/c1: %d %v, want %v", status, body, want)
	}
	// Rejected and invalid commands stored nothing.
	counts := countTypes(t, app.Store)
	if counts["courses.create_course"] != 1 || counts["courses.enrol_student"] != 2 || counts["students.welcomed"] != 2 {
		t.Fatalf("log %v", counts)
	}
}

func TestWebShutsDownInOrder(t *testing.T) {
	path := filepath.Join(t.TempDir(), "web.db")
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	served := make(chan error, 1)
	slog.SetLogLoggerLevel(slog.LevelWarn)
	go func() { served <- serve(ctx, "127.0.0.1:0", path, ready) }()
	var addr string
	select {
	case addr = <-ready:
	case err := <-served:
		t.Fatal(err)
	}
	client := &http.Client{Timeout: 10 * time.Second}
	if status, body := call(t, client, "POST", "http://"+addr+"/courses", `{"course_id":"c1","course_name":"Algebra","capacity":100}`); status != 201 {
		t.Fatalf("create: %d %v", status, body)
	}
	// Many enrolments at once, then the shutdown right after the last
	// answer: every one's welcome must still be decided (drained) before
	// the workers stop and the store closes.
	var wg sync.WaitGroup
	for i := range 30 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if status, body := call(t, client, "POST", "http://"+addr+"/courses/c1/students", fmt.Sprintf(`{"student_id":"s%02d"}`, i)); status != 201 {
				t.Errorf("enrol s%02d: %d %v", i, status, body)
			}
		}()
	}
	wg.Wait()
	cancel()
	select {
	case err := <-served:
		if err != nil {
			t.Fatalf("serve: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not return after the shutdown began")
	}
	if _, err := http.Get("http://" + addr + "/courses/c1"); err == nil {
		t.Fatal("the server still accepts requests after the shutdown")
	}
	// Reopened: the store was closed cleanly, the log holds every welcome
	// and the read model every student.
	app, err := Open(context.Background(), path, quiet())
	if err != nil {
		t.Fatalf("reopening the store: %v", err)
	}
	defer app.Close()
	counts := countTypes(t, app.Store)
	if counts["courses.student_enrolled"] != 30 || counts["students.welcomed"] != 30 {
		t.Fatalf("log %v: every enrolment's welcome must be drained before the workers stop", counts)
	}
	r, found, err := app.roster(context.Background(), "c1")
	if err != nil || !found || len(r.Students) != 30 || len(r.Welcomed) != 30 {
		t.Fatalf("roster %+v (found %v, %v): the read model must be drained too", r, found, err)
	}
}
