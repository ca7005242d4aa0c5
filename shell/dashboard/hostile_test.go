package dashboard_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/sourced-go/sourced/shell/dashboard"
	"github.com/sourced-go/sourced/shell/dashboard/internal/demo"
	"github.com/sourced-go/sourced/shell/memstore"
)

// newDash is a dashboard on a seeded memstore, called directly (no outer
// mux cleaning paths or checking anything first).
func newDash(t *testing.T, opts dashboard.Options) http.Handler {
	t.Helper()
	app := demo.New()
	s := memstore.New(app.Registry)
	if _, err := app.Seed(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	opts.Reactors = app.Reactors()
	d, err := dashboard.New(s, opts)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// do serves one request; headers are name, value pairs ("Host" sets the
// request's Host).
func do(h http.Handler, method, target string, form url.Values, headers ...string) *httptest.ResponseRecorder {
	var req *http.Request
	if form != nil {
		req = httptest.NewRequest(method, target, strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	} else {
		req = httptest.NewRequest(method, target, nil)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		if headers[i] == "Host" {
			req.Host = headers[i+1]
			continue
		}
		req.Header.Set(headers[i], headers[i+1])
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

func TestHostHeaderIsChecked(t *testing.T) {
	d := newDash(t, dashboard.Options{Hosts: []string{"localhost", "127.0.0.1", "::1"}})
	for _, host := range []string{"127.0.0.1:8080", "localhost:8080", "LOCALHOST", "[::1]:8080"} {
		if rec := do(d, "GET", "/log", nil, "Host", host); rec.Code != http.StatusOK {
			t.Errorf("GET /log with Host %s: %d, want 200", host, rec.Code)
		}
	}
	for _, host := range []string{"evil.example:8080", "evil.example", "127.0.0.1.evil.example:8080", ""} {
		for _, req := range []struct{ method, path string }{{"GET", "/"}, {"GET", "/log"}, {"GET", "/live"}, {"POST", "/groups/courses.catalog/stop"}} {
			var form url.Values
			hs := []string{"Host", host}
			if req.method == "POST" {
				form = url.Values{}
				hs = append(hs, "Origin", "http://"+host)
			}
			rec := do(d, req.method, req.path, form, hs...)
			if rec.Code != http.StatusMisdirectedRequest {
				t.Errorf("%s %s with Host %q: %d, want 421", req.method, req.path, host, rec.Code)
			}
		}
	}
	// Without Options.Hosts, any Host is served (an application mounting
	// the dashboard checks it itself).
	open := newDash(t, dashboard.Options{})
	if rec := do(open, "GET", "/log", nil, "Host", "app.example"); rec.Code != http.StatusOK {
		t.Fatalf("no Hosts: %d, want 200", rec.Code)
	}
}

func TestSameOriginChecks(t *testing.T) {
	d := newDash(t, dashboard.Options{})
	cases := []struct {
		name    string
		headers []string
		want    int
	}{
		{"same origin", []string{"Host", "dash.test", "Origin", "http://dash.test"}, http.StatusSeeOther},
		{"no browser headers", []string{"Host", "dash.test"}, http.StatusSeeOther},
		{"https origin on an http server", []string{"Host", "dash.test", "Origin", "https://dash.test"}, http.StatusForbidden},
		{"Sec-Fetch-Site none with a foreign Origin", []string{"Host", "dash.test", "Sec-Fetch-Site", "none", "Origin", "http://evil.example"}, http.StatusForbidden},
		{"same-site", []string{"Host", "dash.test", "Sec-Fetch-Site", "same-site"}, http.StatusForbidden},
		{"Origin null", []string{"Host", "dash.test", "Origin", "null"}, http.StatusForbidden},
	}
	for _, c := range cases {
		// stop, then start again, so that every case finds the group active
		rec := do(d, "POST", "/groups/courses.catalog/stop", url.Values{}, c.headers...)
		if rec.Code != c.want {
			t.Errorf("%s: %d, want %d", c.name, rec.Code, c.want)
		}
		if rec.Code == http.StatusSeeOther {
			do(d, "POST", "/groups/courses.catalog/start", url.Values{}, "Host", "dash.test")
		}
	}
}

func TestBackRedirectStaysOnTheDashboard(t *testing.T) {
	for _, prefix := range []string{"", "/ops"} {
		d := newDash(t, dashboard.Options{Prefix: prefix})
		for _, back := range []string{"/\\evil.example", "/\t/evil.example", "//evil.example", "/\n/evil.example", "https://evil.example", "/\\/evil.example"} {
			rec := do(d, "POST", prefix+"/groups/courses.catalog/stop", url.Values{"back": {back}})
			loc := rec.Header().Get("Location")
			if rec.Code != http.StatusSeeOther || !strings.HasPrefix(loc, prefix+"/?flash=") {
				t.Errorf("prefix %q, back=%q: %d to %q, want 303 to %s/?flash=...", prefix, back, rec.Code, loc, prefix)
			}
			do(d, "POST", prefix+"/groups/courses.catalog/start", url.Values{})
		}
		rec := do(d, "POST", prefix+"/groups/courses.catalog/stop", url.Values{"back": {"/log?types=x"}})
		if loc := rec.Header().Get("Location"); !strings.HasPrefix(loc, prefix+"/log?types=x&flash=") {
			t.Fatalf("back=/log?types=x: to %q", loc)
		}
	}
}

func TestCleaningRedirectsKeepThePrefix(t *testing.T) {
	d := newDash(t, dashboard.Options{Prefix: "/ops"})
	for target, want := range map[string]string{
		"/ops//log":                "/ops/log",
		"/ops/groups/../log?x=1":   "/ops/log?x=1",
		"/ops/static":              "/ops/static/",
		"/ops/./machines":          "/ops/machines",
		"/ops/groups//courses.cat": "/ops/groups/courses.cat",
	} {
		req := httptest.NewRequest("GET", "/", nil)
		u, _ := url.Parse(target)
		req.URL = u
		rec := httptest.NewRecorder()
		d.ServeHTTP(rec, req)
		if loc := rec.Header().Get("Location"); rec.Code != http.StatusTemporaryRedirect || loc != want {
			t.Errorf("GET %s: %d to %q, want 307 to %s", target, rec.Code, loc, want)
		}
	}
}

func TestSecurityHeaders(t *testing.T) {
	d := newDash(t, dashboard.Options{})
	rec := do(d, "GET", "/", nil)
	csp := rec.Header().Get("Content-Security-Policy")
	for _, want := range []string{"frame-ancestors 'none'", "base-uri 'none'", "form-action 'self'", "default-src 'self'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("CSP %q lacks %q", csp, want)
		}
	}
	if rp := rec.Header().Get("Referrer-Policy"); rp != "same-origin" {
		t.Errorf("Referrer-Policy %q", rp)
	}
	if rec := do(d, "GET", "/static/", nil); rec.Code != http.StatusNotFound || strings.Contains(rec.Body.String(), "app.js") {
		t.Errorf("GET /static/: %d %q, want 404 without a listing", rec.Code, rec.Body.String())
	}
	if rec := do(d, "GET", "/static/app.css", nil); rec.Code != http.StatusOK {
		t.Errorf("GET /static/app.css: %d", rec.Code)
	}
	for _, path := range []string{"/groups/no.such.group", "/messages/not-an-id"} {
		rec := do(d, "GET", path, nil)
		if cc := rec.Result().Header.Get("Cache-Control"); rec.Code < 400 || cc != "no-store" {
			t.Errorf("GET %s: %d with Cache-Control %q, want an error page with no-store", path, rec.Code, cc)
		}
	}
}
