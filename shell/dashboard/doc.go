// Package dashboard is Sourced's web dashboard: an http.Handler that an
// application mounts in its own server (or that `sourced serve` runs on
// localhost) to see and operate its store:
//
//	dash, err := dashboard.New(store, dashboard.Options{
//		Reactors: []any{courses, enrolments, catalog, orders, greeting}, // topology, machines, workflows
//		Prefix:   "/ops",
//	})
//	mux.Handle("/ops/", requireAdmin(dash)) // behind the application's own authentication
//
// # Pages
//
//   - Groups (/): every consumer group with its status, its lag (the
//     partitions with pending work, and the messages of its handled types
//     the Options.LagPartitions partitions furthest behind have not
//     processed, a lower bound, on stores that count it: shell.Lagger,
//     which sqlitestore, pgstore and memstore implement), its partitions and
//     how many are parked, its retry time and its failure (the error, its
//     type, the message and partition it failed on); the
//     operator actions stop, start, reset and retry, each asking for
//     confirmation, and disabled when the group's status does not accept
//     them (by the status chart of package statechart/groupstatus; retry
//     retries a retrying group now and starts a failed one again).
//   - A group (/groups/{id}) and partitions (/partitions): offsets with
//     their positions, lag and claims; the workers with their heartbeats
//     and claims (stores with a Workers method); parked partitions with
//     the failure that parked them and the actions retry, skip (its
//     failed message) and reset.
//   - The log (/log): filtered by message types and attribute values
//     (conditions, as the store reads them), paged towards older and newer
//     messages; a message's page (/messages/{id}) shows its payload,
//     metadata, causation and correlation, and its correlation trace as a
//     tree of what caused what.
//   - Scheduled messages (/scheduled), when the store lists them (the
//     SQLite, in-memory and PostgreSQL stores do).
//   - Machines (/machines): each statechart.Machine among the reactors,
//     its chart drawn as nested states with their transitions, and an
//     instance's configuration highlighted (?partition=key:value), replayed
//     from its state events' moves.
//   - Topology (/topology): the Event Modeling board of package
//     shell/topology as SVG, its Mermaid source and JSON, compared with
//     the log's newest messages (Options.ObserveLast): each handler's
//     declared edges confirmed or unobserved, and the edges the log shows
//     that no handler declares.
//   - Workflows (/workflows): the newest 100 runs of every shell/workflow
//     definition with their status; a run's page shows its steps, input,
//     output and error.
//
// A page that meets a message the store cannot decode (a
// *shell.DecodeError) shows it as such, with its position, type and the
// error, among the messages around it, instead of failing whole.
//
// Pages are rendered on the server with html/template; the stylesheet and
// the one small script are embedded in the binary: no build step and no
// CDN. The script asks for confirmation before an action and refreshes
// the page's content every Options.Refresh and at once when the store
// announces an append (server-sent events on /live); without it every page
// still works. The layout folds tables into cards on a phone screen.
//
// # Security
//
// The dashboard has no authentication of its own: mount it behind the
// application's (a middleware that checks the session or a client
// certificate before calling ServeHTTP), or serve it on localhost only,
// as `sourced serve` does. Options.ReadOnly hides the operator actions and
// refuses them with 403 for viewers who may look but not act. Actions are
// POST requests refused when the browser says they come from another
// site (Sec-Fetch-Site other than same-origin or none; an Origin whose
// scheme or host is not the request's), and the page an action returns
// to (back=) must be a path of the dashboard. Options.Hosts lists the
// host names the dashboard answers to, refusing any other Host with 421
// (DNS rebinding: `sourced serve` gives the loopback names and its
// address). Pages forbid framing and run under a strict
// Content-Security-Policy (frame-ancestors, base-uri and form-action
// included) with Referrer-Policy: same-origin (no referrer leaves for
// another site; no-referrer would make browsers post "Origin: null",
// which the same-origin check refuses); pages and error pages are
// Cache-Control: no-store; /static/ lists nothing. Paths are cleaned
// (redirected) under Options.Prefix.
//
// # Costs
//
// Every page makes a bounded number of store queries, whatever the size
// of the log and however many partitions are behind: a group's lag
// counts its pending and parked partitions in one query each and the
// messages of at most Options.LagPartitions partitions (up to
// shell.DefaultLagLimit each); lists of partitions are pages of 50 or 100
// whose lag is counted for that page only; the workers' claims are
// counted by the store's Workers query; the log comes in pages of at
// most 500 messages; the workflows page reads the newest 100 runs of each
// workflow; parked partitions come in pages of 50 on stores that page
// them (shell.ParkedReader). Reading around an undecodable message costs
// one query per message of its page.
//
// The application reads through the same store, and each request may hold
// one of its reader connections: the dashboard serves at most
// Options.MaxConcurrentPages requests at once (pages and actions; not
// /static/ nor /live), a request beyond the cap waiting up to
// Options.PageWait before it is refused with 503 Service Unavailable and
// Retry-After; and each request runs under Options.PageTimeout, a
// deadline that interrupts its store queries (503 when it runs out).
//
// The dashboard works on any shell.Store; it is for operators, not for a
// public page.
package dashboard
