package dashboard_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

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
