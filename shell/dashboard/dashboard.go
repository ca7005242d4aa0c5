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
	"net"
	"net/http"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/internal/textclip"
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
	// and OnReset hooks run in this process before the action returns
	// (and their errors show); without it they go to the store directly,
	// and a runtime running the group's reactor runs the hooks at its next
	// catch-up poll (the group's work waits for them; see the shell
	// package doc, "Lifecycle hooks").
	Router *shell.Router
	// ObserveLast is how many of the log's newest messages the topology
	// page (and its SVG and JSON) reads to set the edges the log shows
	// beside the declared ones, flagging a declared edge the window never
	// shows and an observed one no handler declares (see
	// topology.Observe). 0: 1000; negative: the topology is not compared
	// with the log. Each view of the page reads that many messages.
	ObserveLast int
	// Title is shown in the header (default "Sourced").
	Title string
	// Logger receives request failures at DEBUG and operator actions at
	// INFO (nil: slog.Default()).
	Logger *slog.Logger
	// Hosts, when not empty, are the only host names a request may name in
	// its Host header (compared without the port, ignoring case): any
	// other request is refused with 421 Misdirected Request before it
	// reaches a page or an action. It defends a dashboard without
	// authentication (sourced serve on a loopback address) against DNS
	// rebinding, where a page on the attacker's site resolves its own
	// name to the loopback address: the browser then sends the attacker's
	// name as Host (and as Origin). Give the names the server is reached
	// by, such as "localhost", "127.0.0.1" and "::1". Empty: every Host is
	// accepted (an application mounting the dashboard checks it itself).
	Hosts []string
	// LagPartitions is how many of a group's pending partitions (those
	// furthest behind) the groups page and a group's page count the
	// pending messages of, for the group's lag (0: 20; negative: none; at
	// most shell.MaxLagPartitions). The lag then reads "≥ n": the pending
	// and parked partitions are always counted in full (one query each),
	// and a list of partitions counts the lag of its page's partitions
	// only, so a page costs the same however many partitions are behind.
	LagPartitions int
	// MaxConcurrentPages caps the requests the dashboard serves at once
	// (pages and actions; not /static/ nor the /live stream): each holds
	// one of the store's reader connections while it runs, and the
	// application reads through the same pool (0: 2; negative: no cap). A
	// request beyond the cap waits up to PageWait for its turn, then is
	// refused with 503 Service Unavailable and Retry-After.
	MaxConcurrentPages int
	// PageWait is how long a request waits for its turn under
	// MaxConcurrentPages (0: 2 s).
	PageWait time.Duration
	// PageTimeout is each request's time budget: the deadline of its
	// context, which interrupts the store's queries (0: 10 s; negative:
	// none). A page that runs out of it answers 503 Service Unavailable.
	PageTimeout time.Duration
	// Recorder, when given, is the Recorder the application's runtime
	// reports to (set as its shell.Observer): the groups page and each
	// group's page chart what it observed (messages handled, claims,
	// guard conflicts, failures and retries, the hottest partitions) over
	// the last minutes and hours. Without it the charts show what the
	// dashboard samples from the store as its pages render (the lag, the
	// log's appended messages) only. See the package doc, "Charts".
	Recorder *Recorder
}

// Defaults of Options.
const (
	DefaultLagPartitions      = 20
	DefaultMaxConcurrentPages = 2
	DefaultPageWait           = 2 * time.Second
	DefaultPageTimeout        = 10 * time.Second
)

// Dashboard is the web dashboard: an http.Handler serving the pages
// (see the package doc).
type Dashboard struct {
	store shell.Store
	opts  Options
	graph topology.Graph
	pages map[string]*template.Template
	mux   *http.ServeMux
	log   *slog.Logger
	// turns holds a token per request being served (nil: no cap).
	turns chan struct{}
	// rec keeps the charts' series: Options.Recorder, or one of the
	// dashboard's own for the store's samples (observed false).
	rec      *Recorder
	observed bool
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
	switch {
	case opts.LagPartitions == 0:
		opts.LagPartitions = DefaultLagPartitions
	case opts.LagPartitions < 0:
		opts.LagPartitions = 0
	case opts.LagPartitions > shell.MaxLagPartitions:
		opts.LagPartitions = shell.MaxLagPartitions
	}
	if opts.MaxConcurrentPages == 0 {
		opts.MaxConcurrentPages = DefaultMaxConcurrentPages
	}
	if opts.PageWait <= 0 {
		opts.PageWait = DefaultPageWait
	}
	if opts.PageTimeout == 0 {
		opts.PageTimeout = DefaultPageTimeout
	}
	d := &Dashboard{store: store, opts: opts, log: opts.Logger, rec: opts.Recorder, observed: opts.Recorder != nil}
	if d.rec == nil {
		d.rec = NewRecorder(RecorderOptions{})
	}
	if opts.MaxConcurrentPages > 0 {
		d.turns = make(chan struct{}, opts.MaxConcurrentPages)
	}
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

// contentSecurityPolicy is every response's Content-Security-Policy: the
// dashboard's own scripts, styles and images only, never framed, no
// <base> to re-root its links, forms posted to itself only.
const contentSecurityPolicy = "default-src 'self'; style-src 'self'; script-src 'self'; img-src 'self' data:; " +
	"frame-ancestors 'none'; base-uri 'none'; form-action 'self'"

// ServeHTTP serves the dashboard's pages, its actions and its assets.
func (d *Dashboard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Content-Security-Policy", contentSecurityPolicy)
	// same-origin, not no-referrer: under no-referrer a browser sends
	// "Origin: null" with a form post, which sameOrigin must refuse.
	h.Set("Referrer-Policy", "same-origin")
	if !d.hostAllowed(r.Host) {
		d.fail(w, r, http.StatusMisdirectedRequest, fmt.Errorf("host %s is not one this dashboard serves (dashboard.Options.Hosts)", quoteShort(r.Host)))
		return
	}
	p := r.URL.Path
	if d.opts.Prefix != "" {
		p = strings.TrimPrefix(r.URL.Path, d.opts.Prefix)
		if p == r.URL.Path {
			http.NotFound(w, r)
			return
		}
		if p == "" {
			p = "/"
		}
	}
	// Clean the path here rather than let the mux redirect to a cleaned
	// path that has lost the prefix.
	if c := cleanPath(p); c != p {
		u := *r.URL
		u.Path, u.RawPath = d.opts.Prefix+c, ""
		http.Redirect(w, r, u.RequestURI(), http.StatusTemporaryRedirect)
		return
	}
	if p == "/static" {
		http.Redirect(w, r, d.opts.Prefix+"/static/", http.StatusTemporaryRedirect)
		return
	}
	if p != r.URL.Path {
		r2 := r.Clone(r.Context())
		r2.URL.Path = p
		r2.URL.RawPath = ""
		r = r2
	}
	if p == "/live" || strings.HasPrefix(p, "/static/") {
		d.mux.ServeHTTP(w, r)
		return
	}
	if d.turns != nil {
		wait := time.NewTimer(d.opts.PageWait)
		select {
		case d.turns <- struct{}{}:
			wait.Stop()
		case <-wait.C:
			w.Header().Set("Retry-After", "1")
			d.fail(w, r, http.StatusServiceUnavailable, fmt.Errorf("the dashboard is serving %d requests already (dashboard.Options.MaxConcurrentPages), to leave the store's readers to the application: try again in a moment", cap(d.turns)))
			return
		case <-r.Context().Done():
			wait.Stop()
			return
		}
		defer func() { <-d.turns }()
	}
	if d.opts.PageTimeout > 0 {
		ctx, cancel := context.WithTimeout(r.Context(), d.opts.PageTimeout)
		defer cancel()
		r = r.WithContext(ctx)
	}
	d.mux.ServeHTTP(w, r)
}

// cleanPath is p as http.ServeMux would clean it: rooted, without . and
// .. elements or repeated slashes, keeping a trailing slash.
func cleanPath(p string) string {
	if p == "" {
		return "/"
	}
	if p[0] != '/' {
		p = "/" + p
	}
	c := path.Clean(p)
	if p[len(p)-1] == '/' && c != "/" {
		c += "/"
	}
	return c
}

// hostAllowed reports whether host (a request's Host header) names one of
// Options.Hosts; any host when there are none.
func (d *Dashboard) hostAllowed(host string) bool {
	if len(d.opts.Hosts) == 0 {
		return true
	}
	name := host
	if h, _, err := net.SplitHostPort(host); err == nil {
		name = h
	}
	name = strings.TrimSuffix(strings.TrimPrefix(name, "["), "]")
	for _, a := range d.opts.Hosts {
		a = strings.TrimSuffix(strings.TrimPrefix(a, "["), "]")
		if name != "" && strings.EqualFold(name, a) {
			return true
		}
	}
	return false
}

// quoteShort quotes s for an error message, cut to 100 bytes: a message
// never repeats unbounded input.
func quoteShort(s string) string { return textclip.Quote(s, 100) }

// noListing serves the static assets but no directory listing.
func noListing(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "" || strings.HasSuffix(r.URL.Path, "/") {
			http.NotFound(w, r)
			return
		}
		h.ServeHTTP(w, r)
	})
}

func (d *Dashboard) routes() {
	m := http.NewServeMux()
	static, _ := fs.Sub(assets, "static")
	m.Handle("GET /static/", http.StripPrefix("/static/", noListing(http.FileServerFS(static))))
	m.HandleFunc("GET /{$}", d.groupsPage)
	m.HandleFunc("GET /groups/{id}", d.groupPage)
	m.HandleFunc("GET /groups/{id}/state", d.statePage)
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

var pageNames = []string{"groups", "group", "partitions", "log", "message", "scheduled", "topology", "machines", "machine", "workflows", "workflow", "state", "error"}

func (d *Dashboard) parse() error {
	funcs := template.FuncMap{
		"ts":        formatTime,
		"ago":       func(t time.Time) string { return ago(d.store.Now(), t) },
		"partition": func(p map[string]string) string { return core.Partition(p).String() },
		"join":      strings.Join,
		"url":       func(p string) string { return d.opts.Prefix + p },
		"contains":  func(xs []string, x string) bool { return slices.Contains(xs, x) },
		"json":      prettyJSON,
		"short":     shortID,
		"stateurl":  stateURL,
		"cut":       cutJSON,
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
	d.renderStatus(w, r, http.StatusOK, name, section, title, data)
}

// renderStatus renders page name with the given status.
func (d *Dashboard) renderStatus(w http.ResponseWriter, r *http.Request, status int, name, section, title string, data any) {
	p := page{Title: title, App: d.opts.Title, Section: section, ReadOnly: d.opts.ReadOnly, Prefix: d.opts.Prefix, Now: d.store.Now(), Data: data, Flash: r.URL.Query().Get("flash")}
	if d.opts.Refresh > 0 {
		p.Refresh = int(d.opts.Refresh / time.Millisecond)
	}
	var b bytes.Buffer
	if err := d.pages[name].ExecuteTemplate(&b, "layout", p); err != nil {
		d.log.DebugContext(r.Context(), "dashboard: rendering failed", "page", name, "error", err)
		w.Header().Set("Cache-Control", "no-store")
		http.Error(w, "rendering failed: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(b.Bytes())
}

// fail renders the error page: status 400 for bad input, 404 for what is
// not there, 500 for the store's errors.
func (d *Dashboard) fail(w http.ResponseWriter, r *http.Request, status int, err error) {
	if errors.Is(err, context.DeadlineExceeded) && errors.Is(r.Context().Err(), context.DeadlineExceeded) {
		err = fmt.Errorf("the request ran out of its time budget of %s (dashboard.Options.PageTimeout): %w", d.opts.PageTimeout, err)
		w.Header().Set("Retry-After", "5")
	}
	d.log.DebugContext(r.Context(), "dashboard: request failed", "path", r.URL.Path, "status", status, "error", err)
	d.renderStatus(w, r, status, "error", "", http.StatusText(status), struct {
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
