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
//     Below them, charts over time (see Charts).
//   - A group (/groups/{id}) and partitions (/partitions): offsets with
//     their positions, lag and claims; the workers with their heartbeats
//     and claims (stores with a Workers method); parked partitions with
//     the failure that parked them and the actions retry, skip (its
//     failed message) and reset. A group's page charts the group over
//     time, with its hottest partitions, and links each partition to its
//     state (a projector's at its offset, what it processed; a decider's
//     or machine's at the partition's last message, since its events
//     follow the command at its offset).
//   - A partition's state (/groups/{id}/state?partition=k:v&at=N): time
//     travel (StateAt). What the group's decider, projector or machine
//     holds for the partition just after position N (its last by
//     default; 0: before its first message), folded from the log: the
//     state as JSON, a machine's active states highlighted on its chart;
//     the message it handles next, the messages the log shows it caused
//     and, for a decision with a query of its own (core.Reads), each part
//     of the query with the messages it read (up to just before the
//     command); links to step back and forward through the partition's
//     messages. A message's page links to the state of every reactor
//     that handles or folds it, for its partition, just before it (a
//     message the reactor handles, so that it shows as the decision made
//     next) or just after it (a message it folds). `sourced state` prints
//     the same.
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
// # Charts
//
// The groups page (every group together) and each group's page draw four
// charts over the last 10 minutes (?window=10m, slots of 5 s), hour (1h)
// or 3 hours (3h, slots of 75 s): the lag (pending messages), the
// throughput (messages handled per second, and the log's appended
// messages per second), the claims and guard conflicts per second, and
// the failures and retries per slot; below them the hottest partitions
// (claims and conflicts; a conflict weighs as ten claims), each linked to
// its state. They are inline SVG drawn on the server with a fixed viewBox
// (320x120, scaled to the page's width), presentation attributes and the
// stylesheet's classes only: no script draws them and the
// Content-Security-Policy stays as strict as above. They are part of the
// page's content, so they update in place with it (every Options.Refresh
// and on appends).
//
// Two sources feed them. What the runtime does (handled, claims,
// conflicts, failures, retries, hot partitions) comes from a Recorder,
// the runtime's shell.Observer, given as Options.Recorder: it keeps what
// this process observed, so with several processes each dashboard shows
// its own process's work, not the store's (mount the dashboard in each, or
// read the totals from shell/otelobserver's metrics); a dashboard without
// one (`sourced serve`) leaves these series empty and says so. What the
// store knows (the lag of each group, the log's last position, from which
// the appended messages per second are derived) is sampled from the reads
// the groups page and a group's page make anyway, as they render: no
// query is added, the values are the store's view (every process's), and
// the series have gaps while no page is open.
//
// Memory is bounded whatever the number of partitions or messages: a
// Recorder keeps, for each of at most RecorderOptions.Groups groups (32),
// two rings of fixed slots (120 of 5 s and 144 of 75 s), each slot its
// counters and at most RecorderOptions.HotPartitions partitions (5; the
// space-saving algorithm keeps any partition with more than a fifth of
// the slot's claims, and the counts shown are exact lower bounds) with
// keys cut to 64 bytes. A group costs about 180 KiB at worst (every slot
// of both rings holding five 64-byte keys), so the default cap costs at
// most about 6 MiB per process (TestRecorderMemory measures it), and
// much less for groups that are idle part of the time. Observe takes a
// mutex for a few additions. Groups beyond the cap are not charted
// (Recorder.Dropped counts their observations).
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
// one query per message of its page. The charts add no store query. A
// partition's state reads its messages up to the position (at most
// MaxStateHistory, 10,000: a longer history is folded from the decider's
// latest snapshot at or before the position, or refused), the next 10,
// the correlation of the message handled next and, for a decision with a
// query, the query's union up to that message (at most MaxStateHistory).
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
