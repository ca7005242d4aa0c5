package dashboard_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell"
	"github.com/sourced-go/sourced/shell/dashboard"
	"github.com/sourced-go/sourced/shell/dashboard/internal/demo"
	"github.com/sourced-go/sourced/shell/memstore"
)

// Mount the dashboard under /ops in the application's own server, behind
// its authentication.
func ExampleNew() {
	app := demo.New()
	store := memstore.New(app.Registry) // sqlitestore.Open in production
	if _, err := app.Seed(context.Background(), store); err != nil {
		panic(err)
	}
	requireAdmin := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Authorization") != "Bearer let-me-in" { // the application's own check
				http.Error(w, "forbidden", http.StatusForbidden)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
	dash, err := dashboard.New(store, dashboard.Options{Reactors: app.Reactors(), Prefix: "/ops"}) // ReadOnly: true for viewers
	if err != nil {
		panic(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/ops/", requireAdmin(dash))

	srv := httptest.NewServer(mux)
	defer srv.Close()
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/ops/", nil)
	req.Header.Set("Authorization", "Bearer let-me-in")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		panic(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	fmt.Println(res.StatusCode, strings.Contains(string(body), `data-group="courses.search_index" data-status="retrying"`))
	// Output:
	// 200 true
}

// Chart what this process's runtime does: the recorder is the runtime's
// observer and the dashboard's source of charts.
func ExampleRecorder() {
	app := demo.New()
	store := memstore.New(app.Registry)
	rec := dashboard.NewRecorder(dashboard.RecorderOptions{}) // a bounded ring per process
	router, err := shell.NewRouter(store, shell.RouterOptions{Observer: rec}, app.Reactors()...)
	if err != nil {
		panic(err)
	}
	dash, err := dashboard.New(store, dashboard.Options{Reactors: app.Reactors(), Recorder: rec})
	if err != nil {
		panic(err)
	}

	ctx := context.Background()
	if err := router.Setup(ctx); err != nil {
		panic(err)
	}
	if _, err := store.Append(ctx, core.Messages(demo.CreateCourse{CourseID: "algebra", Title: "Algebra"}), shell.AppendOptions{}); err != nil {
		panic(err)
	}
	if err := router.Drain(ctx, &shell.DrainOptions{}); err != nil {
		panic(err)
	}
	srv := httptest.NewServer(dash)
	defer srv.Close()
	res, err := http.Get(srv.URL + "/groups/courses.course_decider")
	if err != nil {
		panic(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	fmt.Println(strings.Count(string(body), `<svg class="timeline-svg"`), strings.Contains(string(body), `data-partition="course_id:algebra"`))
	// Output:
	// 4 true
}

// What a decision with a query saw: the state the seats decider holds for
// a course just before its reservation, and each part of its query with
// what it read.
func ExampleStateAt() {
	app := demo.New()
	store := memstore.New(app.Registry)
	ctx := context.Background()
	if _, err := app.Seed(ctx, store); err != nil {
		panic(err)
	}
	reserve, err := store.Read(ctx, []core.Condition{{Type: "courses.reserve_seat"}}, shell.ReadOptions{})
	if err != nil {
		panic(err)
	}
	st, err := dashboard.StateAt(ctx, store, nil, app.Reactors(), dashboard.StateQuery{
		Group:     "courses.seats",
		Partition: map[string]string{"course_id": "algebra"},
		At:        reserve.Messages[0].Position - 1, // dashboard.Latest: after its last message
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(string(st.State), st.Decision.Message.Type)
	for _, q := range st.Decision.Queries {
		fmt.Println(q.Conditions, "read", q.Matched)
	}
	fmt.Println("produced", st.Decision.Produced[0].Type)
	// Output:
	// {"exists":false,"enrolled":0,"reserved":0} courses.reserve_seat
	// [courses.course_created(course_id=algebra)] read 1
	// [courses.student_enrolled(course_id=algebra)] read 2
	// [courses.seat_reserved(course_id=algebra)] read 0
	// produced courses.seat_reserved
}
