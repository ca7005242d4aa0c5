package dashboard

import (
	"bytes"
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell"
	"github.com/sourced-go/sourced/shell/topology"
)

//go:embed templates static
var assets embed.FS

// Options configure a dashboard.
type Options struct {
	// Reactors are the application's reactors (what it registers with its
	// runtime): they give the topology page, the machines page (charts
	// and instances) and the names of the workflows. Without them those
	// pages say so, and workflows are found from the store's groups.
	Reactors []any
	// Registry names the reactors' types for the topology and the
	// machines (default: the store's). A store opened with raw payloads
	// (as the sourced tool opens one) has an empty registry: give the
	// application's.
	Registry *codec.Registry
	// ReadOnly hides the operator actions and refuses their requests with
	// 403 Forbidden.
	ReadOnly bool
	// Refresh is how often a page reloads its content (0: every 5 s;
	// negative: never). Pages also reload as soon as the store announces an
	// append (server-sent events).
	Refresh time.Duration
	// Prefix is the path the dashboard is mounted under ("/ops" for
	// mux.Handle("/ops/", dash)), with no trailing slash: links and
	// requests carry it. Empty: mounted at the root.
	Prefix string
	// Router, when given, runs the operator actions stop, start and reset
	// (Router.Stop, Start, Reset), so that the reactors' OnStop, OnStart
	// and OnReset hooks run; without it they go to the store directly.
	Router *shell.Router
	// Title is shown in the header (default "Sourced").
	Title string
	// Logger receives request failures at DEBUG and operator actions at
	// INFO (nil: slog.Default()).
	Logger *slog.Logger
}

// Dashboard is the web dashboard: an http.Handler serving the pages
// (see the package doc).
type Dashboard struct {
	store    shell.Store
	opts     Options
	graph    topology.Graph
	graphErr error
	pages    map[string]*template.Template
	mux      *http.ServeMux
	log      *slog.Logger
}

// New returns the dashboard of store. The topology of opts.Reactors is
// built once, here; a reactor that is not one is refused with the error
// of topology.Of.
func New(store shell.Store, opts Options) (*Dashboard, error) {
	if store == nil {
		return nil, errors.New("dashboard: nil store")
	}
	opts.Prefix = strings.TrimRight(opts.Prefix, "/")
	if opts.Title == "" {
		opts.Title = "Sourced"
	}
	if opts.Refresh == 0 {
		opts.Refresh = 5 * time.Second
	}
	d := &Dashboard{store: store, opts: opts, log: opts.Logger}
	if d.log == nil {
		d.log = slog.Default()
	}
	if opts.Registry == nil {
		opts.Registry = store.Registry()
	}
	d.opts.Registry = opts.Registry
	if len(opts.Reactors) > 0 {
		g, err := topology.Of(opts.Registry, opts.Reactors...)
		if err != nil {
			return nil, err
		}
		d.graph = g
	}
	if err := d.parse(); err != nil {
		return nil, err
	}
	d.routes()
	return d, nil
}

// ServeHTTP serves the dashboard's pages, its actions and its assets.
func (d *Dashboard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if d.opts.Prefix != "" {
		p := strings.TrimPrefix(r.URL.Path, d.opts.Prefix)
		if p == r.URL.Path {
			http.NotFound(w, r)
			return
		}
		if p == "" {
			p = "/"
		}
		r2 := r.Clone(r.Context())
		r2.URL.Path = p
		r2.URL.RawPath = ""
		r = r2
	}
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("X-Frame-Options", "DENY")
	w.Header().Set("Content-Security-Policy", "default-src 'self'; style-src 'self'; script-src 'self'; img-src 'self' data:")
	d.mux.ServeHTTP(w, r)
}

func (d *Dashboard) routes() {
	m := http.NewServeMux()
	static, _ := fs.Sub(assets, "static")
	m.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	m.HandleFunc("GET /{$}", d.groupsPage)
	m.HandleFunc("GET /groups/{id}", d.groupPage)
	m.HandleFunc("POST /groups/{id}/{action}", d.groupAction)
	m.HandleFunc("GET /partitions", d.partitionsPage)
	m.HandleFunc("POST /parked/{action}", d.parkedAction)
	m.HandleFunc("GET /log", d.logPage)
	m.HandleFunc("GET /messages/{id}", d.messagePage)
	m.HandleFunc("GET /scheduled", d.scheduledPage)
	m.HandleFunc("GET /topology", d.topologyPage)
	m.HandleFunc("GET /topology.svg", d.topologySVG)
	m.HandleFunc("GET /topology.json", d.topologyJSON)
	m.HandleFunc("GET /machines", d.machinesPage)
	m.HandleFunc("GET /machines/{group}", d.machinePage)
	m.HandleFunc("GET /workflows", d.workflowsPage)
	m.HandleFunc("GET /workflows/{name}/{id}", d.workflowRunPage)
	m.HandleFunc("GET /live", d.live)
	d.mux = m
}

var pageNames = []string{"groups", "group", "partitions", "log", "message", "scheduled", "topology", "machines", "machine", "workflows", "workflow", "error"}

func (d *Dashboard) parse() error {
	funcs := template.FuncMap{
		"ts":        formatTime,
		"ago":       func(t time.Time) string { return ago(d.store.Now(), t) },
		"partition": shell.PartitionKey,
		"join":      strings.Join,
		"url":       func(p string) string { return d.opts.Prefix + p },
		"contains":  func(xs []string, x string) bool { return slices.Contains(xs, x) },
		"json":      prettyJSON,
		"short":     shortID,
		"dict": func(kv ...any) map[string]any {
			m := map[string]any{}
			for i := 0; i+1 < len(kv); i += 2 {
				m[fmt.Sprint(kv[i])] = kv[i+1]
			}
			return m
		},
	}
	base, err := template.New("layout").Funcs(funcs).ParseFS(assets, "templates/layout.html")
	if err != nil {
		return err
	}
	d.pages = map[string]*template.Template{}
	for _, name := range pageNames {
		t, err := template.Must(base.Clone()).ParseFS(assets, "templates/"+name+".html")
		if err != nil {
			return fmt.Errorf("dashboard: template %s: %w", name, err)
		}
		d.pages[name] = t
	}
	return nil
}

// page is what every template receives.
type page struct {
	Title    string
	App      string
	Section  string
	ReadOnly bool
	Refresh  int // milliseconds, 0: none
	Prefix   string
	Now      time.Time
	Flash    string
	Data     any
}

var nav = []struct{ Section, Path, Name string }{
	{"groups", "/", "Groups"},
	{"partitions", "/partitions", "Partitions"},
	{"log", "/log", "Log"},
	{"scheduled", "/scheduled", "Scheduled"},
	{"machines", "/machines", "Machines"},
	{"topology", "/topology", "Topology"},
	{"workflows", "/workflows", "Workflows"},
}

// Nav is the navigation, for the layout.
func (p page) Nav() any { return nav }

func (d *Dashboard) render(w http.ResponseWriter, r *http.Request, name, section, title string, data any) {
	p := page{Title: title, App: d.opts.Title, Section: section, ReadOnly: d.opts.ReadOnly, Prefix: d.opts.Prefix, Now: d.store.Now(), Data: data, Flash: r.URL.Query().Get("flash")}
	if d.opts.Refresh > 0 {
		p.Refresh = int(d.opts.Refresh / time.Millisecond)
	}
	var b bytes.Buffer
	if err := d.pages[name].ExecuteTemplate(&b, "layout", p); err != nil {
		d.log.DebugContext(r.Context(), "dashboard: rendering failed", "page", name, "error", err)
		http.Error(w, "rendering failed: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(b.Bytes())
}

// fail renders the error page: status 400 for bad input, 404 for what is
// not there, 500 for the store's errors.
func (d *Dashboard) fail(w http.ResponseWriter, r *http.Request, status int, err error) {
	d.log.DebugContext(r.Context(), "dashboard: request failed", "path", r.URL.Path, "status", status, "error", err)
	w.WriteHeader(status)
	d.render(w, r, "error", "", http.StatusText(status), struct {
		Status int
		Err    string
	}{status, err.Error()})
}

func statusOf(err error) int {
	var unknown *shell.UnknownGroupError
	var invalid *shell.InvalidTransitionError
	var cond *shell.InvalidConditionError
	switch {
	case errors.As(err, &unknown):
		return http.StatusNotFound
	case errors.As(err, &invalid), errors.As(err, &cond):
		return http.StatusConflict
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

func formatTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format("2006-01-02 15:04:05")
}

func ago(now, t time.Time) string {
	if t.IsZero() {
		return ""
	}
	d := now.Sub(t)
	suffix := "ago"
	if d < 0 {
		d, suffix = -d, "from now"
	}
	switch {
	case d < time.Second:
		return "now"
	case d < time.Minute:
		return fmt.Sprintf("%ds %s", int(d.Seconds()), suffix)
	case d < time.Hour:
		return fmt.Sprintf("%dm %s", int(d.Minutes()), suffix)
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh %s", int(d.Hours()), suffix)
	}
	return fmt.Sprintf("%dd %s", int(d.Hours()/24), suffix)
}

func shortID(s string) string {
	if len(s) > 8 {
		return s[len(s)-8:]
	}
	return s
}

// payloadJSON is a message's payload as indented JSON (a store opened
// without the application's types returns it raw).
func payloadJSON(m core.Message) string { return prettyJSON(m.Payload) }
