package dashboard

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell"
	"github.com/sourced-go/sourced/shell/driver"
)

// actions are the operator actions the dashboard offers, in button order.
var actions = []shell.GroupCommand{shell.CmdStop, shell.CmdStart, shell.CmdReset, shell.CmdRetry}

// action is one button of a group's row.
type action struct {
	Name    shell.GroupCommand
	Enabled bool
	Confirm string
}

// groupRow is a consumer group as the groups page shows it.
type groupRow struct {
	shell.GroupInfo
	// Lag is the group's pending work, when the store counts it.
	Lag lag
	// Parked counts the group's parked partitions.
	Parked  int
	Actions []action
}

// offsetRow is a partition's offset with its pending work.
type offsetRow struct {
	shell.Offset
	Lag      int
	LagKnown bool
	// State is the partition's time-travel page at its offset, when the
	// group's reactor keeps a state (see StateAt).
	State string
}

// offsetRows adds their lag to a page of offsets: one count per group on
// the page, of that page's offsets only. It returns the counts by group.
func (d *Dashboard) offsetRows(ctx context.Context, offs []shell.Offset) ([]offsetRow, map[string]lag) {
	ids := map[string][]int64{}
	var groups []string
	for _, o := range offs {
		if _, ok := ids[o.Group]; !ok {
			groups = append(groups, o.Group)
		}
		ids[o.Group] = append(ids[o.Group], o.ID)
	}
	lags := map[string]lag{}
	for _, g := range groups {
		lags[g] = d.lagOf(ctx, g, shell.LagQuery{Offsets: ids[g]})
	}
	rows := make([]offsetRow, 0, len(offs))
	for _, o := range offs {
		l := lags[o.Group]
		rows = append(rows, offsetRow{Offset: o, Lag: l.ByOffset[o.ID], LagKnown: l.Known})
	}
	return rows, lags
}

// groupActions are the buttons of a group in status st: enabled when the
// status chart accepts the command (retry: a retrying group retried now,
// or a failed one started again, as `sourced groups retry` does).
func groupActions(id string, st shell.Status) []action {
	accepts := shell.Accepts(st)
	out := make([]action, 0, len(actions))
	for _, a := range actions {
		enabled := slices.Contains(accepts, a)
		if a == shell.CmdRetry {
			enabled = st == shell.StatusRetrying || st == shell.StatusFailed
		}
		out = append(out, action{Name: a, Enabled: enabled, Confirm: confirmText(id, a)})
	}
	return out
}

func confirmText(id string, a shell.GroupCommand) string {
	switch a {
	case shell.CmdStop:
		return fmt.Sprintf("Stop %s? Its workers stop claiming until it is started again.", id)
	case shell.CmdStart:
		return fmt.Sprintf("Start %s?", id)
	case shell.CmdReset:
		return fmt.Sprintf("Reset %s? Its offsets are cleared: it replays the whole log once started.", id)
	case shell.CmdRetry:
		return fmt.Sprintf("Retry %s now? A retrying group is claimed without waiting for its retry time; a failed one is started again, its failed message first.", id)
	}
	return string(a)
}

// groupRows are the groups of the store's Stats, each with its lag
// (one bounded count per group: see groupLag). A store that does not
// count lag (not a shell.Lagger) has its parked partitions listed once
// to count them.
func (d *Dashboard) groupRows(ctx context.Context) ([]groupRow, shell.Stats, error) {
	st, err := d.store.Stats(ctx)
	if err != nil {
		return nil, st, err
	}
	rows := make([]groupRow, 0, len(st.Groups))
	var counts map[string]int
	for _, g := range st.Groups {
		l := d.groupLag(ctx, g.ID)
		row := groupRow{GroupInfo: g, Lag: l, Parked: int(l.Parked), Actions: groupActions(g.ID, g.Status)}
		if !l.Known {
			if counts == nil {
				counts = map[string]int{}
				parked, err := d.store.ParkedPartitions(ctx, "")
				if err != nil {
					return nil, st, err
				}
				for _, p := range parked {
					counts[p.Group]++
				}
			}
			row.Parked = counts[g.ID]
		}
		rows = append(rows, row)
	}
	slices.SortFunc(rows, func(a, b groupRow) int { return cmp.Compare(a.ID, b.ID) })
	return rows, st, nil
}

func (d *Dashboard) groupsPage(w http.ResponseWriter, r *http.Request) {
	rows, st, err := d.groupRows(r.Context())
	if err != nil {
		d.fail(w, r, statusOf(err), err)
		return
	}
	d.rec.sampleLog(st.MaxPosition)
	for _, g := range rows {
		d.rec.sampleGroup(g.ID, g.HighestPosition, g.Lag)
	}
	d.render(w, r, "groups", "groups", "Consumer groups", struct {
		Groups        []groupRow
		MaxPosition   int64
		Scheduled     int64
		LagPartitions int
		Timelines     timelines
	}{rows, st.MaxPosition, st.Scheduled, d.opts.LagPartitions, d.withStates(d.rec.timelines("", windowOf(r.URL.Query().Get("window")), "/", d.observed))})
}

func (d *Dashboard) groupPage(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	id := r.PathValue("id")
	g, err := d.store.Group(ctx, id)
	if err != nil {
		d.fail(w, r, statusOf(err), err)
		return
	}
	from, _ := strconv.ParseInt(r.URL.Query().Get("from"), 10, 64)
	page, err := d.store.ReadOffsets(ctx, shell.OffsetQuery{Group: id, From: from, Limit: 50})
	if err != nil {
		d.fail(w, r, statusOf(err), err)
		return
	}
	var next int64
	if n := len(page.Offsets); n == 50 {
		next = page.Offsets[n-1].ID + 1
	}
	parkedFrom, _ := strconv.ParseInt(r.URL.Query().Get("parked_from"), 10, 64)
	parked, err := d.parked(ctx, id, parkedFrom, func(from int64) string {
		return "/groups/" + url.PathEscape(id) + "?parked_from=" + strconv.FormatInt(from, 10)
	})
	if err != nil {
		d.fail(w, r, statusOf(err), err)
		return
	}
	l := d.groupLag(ctx, id)
	row := groupRow{GroupInfo: g, Lag: l, Parked: int(parked.Total), Actions: groupActions(g.ID, g.Status)}
	if l.Known {
		row.Parked, parked.Total = int(l.Parked), l.Parked
	}
	offsets, _ := d.offsetRows(ctx, page.Offsets)
	if f, err := foldableOf(d.opts.Registry, d.opts.Reactors, id); err == nil {
		for i, o := range offsets {
			if len(o.Partition) == 0 {
				continue
			}
			// A projector holds what it processed: its state at its
			// offset. A decider's or machine's state is folded from the
			// events it appended after the command at its offset: the
			// partition's last.
			at := Latest
			if f.kind == core.KindProjector {
				at = o.LastPosition
			}
			offsets[i].State = stateURL(id, o.Partition, at)
		}
	}
	d.rec.sampleGroup(id, g.HighestPosition, l)
	d.render(w, r, "group", "groups", "Group "+id, struct {
		Group         groupRow
		Offsets       []offsetRow
		Parked        parkedList
		Back          string
		Total         int64
		Next          int64
		LagPartitions int
		Timelines     timelines
	}{row, offsets, parked, "/groups/" + id, page.Total, next, d.opts.LagPartitions, d.withStates(d.rec.timelines(id, windowOf(r.URL.Query().Get("window")), "/groups/"+url.PathEscape(id), d.observed))})
}

// groupAction runs an operator action: POST /groups/{id}/{stop|start|reset|retry}.
func (d *Dashboard) groupAction(w http.ResponseWriter, r *http.Request) {
	if d.opts.ReadOnly {
		d.fail(w, r, http.StatusForbidden, errors.New("the dashboard is read-only: operator actions are disabled"))
		return
	}
	if !sameOrigin(r) {
		d.fail(w, r, http.StatusForbidden, errors.New("cross-origin request refused"))
		return
	}
	ctx := r.Context()
	id, act := r.PathValue("id"), shell.GroupCommand(r.PathValue("action"))
	var err error
	switch act {
	case shell.CmdStop:
		reason := cmp.Or(r.FormValue("reason"), "stopped from the dashboard")
		if rt := d.opts.Router; rt != nil {
			err = rt.Stop(ctx, id, reason)
		} else {
			err = d.store.StopGroup(ctx, id, reason)
		}
	case shell.CmdStart:
		if rt := d.opts.Router; rt != nil {
			err = rt.Start(ctx, id)
		} else {
			err = d.store.StartGroup(ctx, id)
		}
	case shell.CmdReset:
		if rt := d.opts.Router; rt != nil {
			err = rt.Reset(ctx, id)
		} else {
			err = d.store.ResetGroup(ctx, id)
		}
	case shell.CmdRetry:
		var g shell.GroupInfo
		g, err = d.store.Group(ctx, id)
		switch {
		case err != nil:
		case g.Status == shell.StatusRetrying:
			err = d.store.RetryGroup(ctx, id, d.store.Now(), g.Failure)
		case g.Status == shell.StatusFailed && d.opts.Router != nil:
			err = d.opts.Router.Start(ctx, id)
		case g.Status == shell.StatusFailed:
			err = d.store.StartGroup(ctx, id)
		default:
			err = &shell.InvalidTransitionError{Group: id, Status: g.Status, Command: shell.CmdRetry, Accepts: shell.Accepts(g.Status)}
		}
	default:
		d.fail(w, r, http.StatusNotFound, fmt.Errorf("no action %q: use stop, start, reset or retry", act))
		return
	}
	if err != nil {
		d.fail(w, r, statusOf(err), err)
		return
	}
	d.log.InfoContext(ctx, "dashboard: operator action", "group", id, "action", string(act))
	back := safeBack(r.FormValue("back"), "/")
	http.Redirect(w, r, d.opts.Prefix+back+sep(back)+"flash="+url.QueryEscape(fmt.Sprintf("%s: %s done", id, act)), http.StatusSeeOther)
}

func sep(u string) string {
	if strings.Contains(u, "?") {
		return "&"
	}
	return "?"
}

// safeBack returns back, the page an action returns to, when it is a
// path of this dashboard: rooted, not "//" or "/\" (which browsers read
// as another host), with no backslash or control character (browsers
// drop tabs and newlines from URLs, so "/\t/evil.example" would become
// "//evil.example"); def otherwise.
func safeBack(back, def string) string {
	if back == "" || back[0] != '/' || len(back) > 2048 {
		return def
	}
	for _, c := range back {
		if c < 0x20 || c == 0x7f || c == '\\' {
			return def
		}
	}
	if strings.HasPrefix(back, "//") {
		return def
	}
	u, err := url.Parse(back)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil {
		return def
	}
	return back
}

// sameOrigin refuses form posts from other sites (a browser sends Origin
// or Sec-Fetch-Site with them). Origin, when sent, must be this server
// (its scheme and Host), whatever Sec-Fetch-Site says; Sec-Fetch-Site,
// when sent, must be same-origin or none (typed in by the user).
func sameOrigin(r *http.Request) bool {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" && site != "none" {
		return false
	}
	if o := r.Header.Get("Origin"); o != "" {
		u, err := url.Parse(o)
		if err != nil || u.Host != r.Host || u.Scheme != requestScheme(r) {
			return false
		}
	}
	return true
}

// requestScheme is the scheme the request came by: https under TLS, or
// behind a proxy that says so in X-Forwarded-Proto; http otherwise.
func requestScheme(r *http.Request) string {
	if r.TLS != nil {
		return "https"
	}
	if p := r.Header.Get("X-Forwarded-Proto"); p == "https" || p == "http" {
		return p
	}
	return "http"
}

func (d *Dashboard) partitionsPage(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	q := r.URL.Query()
	from, _ := strconv.ParseInt(q.Get("from"), 10, 64)
	page, err := d.store.ReadOffsets(ctx, shell.OffsetQuery{Group: q.Get("group"), From: from, Limit: 100})
	if err != nil {
		d.fail(w, r, statusOf(err), err)
		return
	}
	var next int64
	if n := len(page.Offsets); n == 100 {
		next = page.Offsets[n-1].ID + 1
	}
	parkedFrom, _ := strconv.ParseInt(q.Get("parked_from"), 10, 64)
	parked, err := d.parked(ctx, q.Get("group"), parkedFrom, func(from int64) string {
		v := url.Values{}
		if g := q.Get("group"); g != "" {
			v.Set("group", g)
		}
		v.Set("parked_from", strconv.FormatInt(from, 10))
		return "/partitions?" + v.Encode()
	})
	if err != nil {
		d.fail(w, r, statusOf(err), err)
		return
	}
	workers, hasWorkers, err := d.workers(ctx)
	if err != nil {
		d.fail(w, r, statusOf(err), err)
		return
	}
	offsets, lags := d.offsetRows(ctx, page.Offsets)
	back := "/partitions"
	if g := q.Get("group"); g != "" {
		back += "?group=" + url.QueryEscape(g)
		if l := lags[g]; l.Known {
			parked.Total = l.Parked
		}
	}
	d.render(w, r, "partitions", "partitions", "Partitions", struct {
		Group      string
		Offsets    []offsetRow
		Parked     parkedList
		Back       string
		Workers    []workerRow
		HasWorkers bool
		Total      int64
		Next       int64
	}{q.Get("group"), offsets, parked, back, workers, hasWorkers, page.Total, next})
}

// logRow is a message of the log page.
type logRow struct {
	core.PositionedMessage
	Summary string
	// Undecodable, when set, says why the store cannot decode the message
	// (which then has only its position, id and type).
	Undecodable string
}

// rowOf is the log row of m.
func rowOf(m core.PositionedMessage) logRow {
	if u, ok := undecodableOf(m.Message); ok {
		return logRow{PositionedMessage: m, Undecodable: u.String()}
	}
	return logRow{PositionedMessage: m, Summary: summary(m.Message)}
}

func summary(m core.Message) string {
	s := compactJSON(m.Payload)
	if r := []rune(s); len(r) > 140 {
		s = string(r[:139]) + "…"
	}
	return s
}

// logFilter is the log page's query: types, attribute values, cursor.
type logFilter struct {
	Types []string
	Where []string // name=value
	From  int64
	Dir   string // "older" (default, newest first) or "newer"
	Limit int
}

func parseLogFilter(q url.Values) (logFilter, []core.Condition, error) {
	f := logFilter{Dir: q.Get("dir"), Limit: 50}
	for _, t := range q["type"] {
		for _, s := range strings.Split(t, ",") {
			if s = strings.TrimSpace(s); s != "" {
				f.Types = append(f.Types, s)
			}
		}
	}
	attrs := map[string]string{}
	for _, w := range q["where"] {
		for _, s := range strings.Split(w, ",") {
			s = strings.TrimSpace(s)
			if s == "" {
				continue
			}
			k, v, ok := strings.Cut(s, "=")
			k = strings.TrimSpace(k)
			if !ok || k == "" {
				return f, nil, fmt.Errorf("attribute filter %q: write name=value, e.g. course_id=c1", s)
			}
			attrs[k] = strings.TrimSpace(v)
			f.Where = append(f.Where, k+"="+strings.TrimSpace(v))
		}
	}
	if v := q.Get("from"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return f, nil, fmt.Errorf("from %q: want a log position", v)
		}
		f.From = n
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 500 {
			return f, nil, fmt.Errorf("limit %q: want 1 to 500", v)
		}
		f.Limit = n
	}
	if f.Dir != "" && f.Dir != "older" && f.Dir != "newer" {
		return f, nil, fmt.Errorf("dir %q: want older or newer", f.Dir)
	}
	if len(attrs) > 0 && len(f.Types) == 0 {
		return f, nil, errors.New("an attribute filter needs a message type: conditions select messages of a type (give one or more, comma-separated)")
	}
	var conds []core.Condition
	for _, t := range f.Types {
		conds = append(conds, core.Condition{Type: t, Attrs: attrs})
	}
	return f, conds, nil
}

func (f logFilter) query(from int64, dir string) string {
	v := url.Values{}
	if len(f.Types) > 0 {
		v.Set("type", strings.Join(f.Types, ","))
	}
	if len(f.Where) > 0 {
		v.Set("where", strings.Join(f.Where, ","))
	}
	if f.Limit != 50 {
		v.Set("limit", strconv.Itoa(f.Limit))
	}
	v.Set("from", strconv.FormatInt(from, 10))
	v.Set("dir", dir)
	return "/log?" + v.Encode()
}

func (d *Dashboard) logPage(w http.ResponseWriter, r *http.Request) {
	f, conds, err := parseLogFilter(r.URL.Query())
	data := struct {
		Filter       logFilter
		TypesText    string
		WhereText    string
		Rows         []logRow
		Older, Newer string
		LastPosition int64
		Err          string
		KnownTypes   []string
	}{Filter: f, TypesText: strings.Join(f.Types, ", "), WhereText: strings.Join(f.Where, ", ")}
	for _, t := range d.store.Registry().Types() {
		data.KnownTypes = append(data.KnownTypes, t.Name)
	}
	if err != nil {
		data.Err = err.Error()
		w.WriteHeader(http.StatusBadRequest)
		d.render(w, r, "log", "log", "Log", data)
		return
	}
	opts := shell.ReadAllOptions{From: f.From, Conditions: conds, Limit: f.Limit, Order: shell.Descending}
	if f.Dir == "newer" {
		opts.Order = shell.Ascending
	}
	page, err := lenient{Store: d.store}.ReadAll(r.Context(), opts)
	if err != nil {
		data.Err = err.Error()
		w.WriteHeader(statusOf(err))
		d.render(w, r, "log", "log", "Log", data)
		return
	}
	msgs := page.Messages
	if opts.Order == shell.Ascending {
		slices.Reverse(msgs) // shown newest first either way
	}
	for _, m := range msgs {
		data.Rows = append(data.Rows, rowOf(m))
	}
	data.LastPosition = page.LastPosition
	if n := len(msgs); n > 0 {
		newest, oldest := msgs[0].Position, msgs[n-1].Position
		more := n == f.Limit
		asc := opts.Order == shell.Ascending
		if oldest > 1 && (asc || more) {
			data.Older = f.query(oldest-1, "older")
		}
		if newest < page.LastPosition && ((!asc && f.From != 0) || (asc && more)) {
			data.Newer = f.query(newest+1, "newer")
		}
	}
	d.render(w, r, "log", "log", "Log", data)
}

// traceNode is a message of a correlation trace with the messages it
// caused.
type traceNode struct {
	Msg      core.PositionedMessage
	Current  bool
	Children []*traceNode
}

// traceTree arranges a correlation's messages by causation: each message
// under the one that caused it (roots: messages whose cause is not in the
// trace, in position order).
func traceTree(msgs []core.PositionedMessage, current uuid.UUID) []*traceNode {
	byID := map[uuid.UUID]*traceNode{}
	for _, m := range msgs {
		byID[m.ID] = &traceNode{Msg: m, Current: m.ID == current}
	}
	var roots []*traceNode
	for _, m := range msgs {
		n := byID[m.ID]
		if p, ok := byID[m.CausationID]; ok && m.CausationID != m.ID {
			p.Children = append(p.Children, n)
			continue
		}
		roots = append(roots, n)
	}
	return roots
}

func (d *Dashboard) messagePage(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	id, err := uuid.Parse(r.PathValue("id"))
	if err != nil {
		d.fail(w, r, http.StatusBadRequest, fmt.Errorf("%q is not a message id (a UUID)", r.PathValue("id")))
		return
	}
	trace, err := d.store.ReadCorrelation(ctx, id)
	var de *shell.DecodeError
	if errors.As(err, &de) && de.Position > 0 {
		// The trace holds a message the store cannot decode: show that
		// rather than fail (the message itself, when it is the one).
		m := core.PositionedMessage{}
		m.ID = id
		if de.MessageID == id {
			m.Position, m.Type = de.Position, de.MessageType
		}
		d.render(w, r, "message", "log", "Message "+cmp.Or(m.Type, id.String()), struct {
			Msg         core.PositionedMessage
			Payload     string
			Metadata    string
			Trace       []*traceNode
			Count       int
			Undecodable string
			States      []stateLink
		}{Msg: m, Undecodable: de.Error()})
		return
	}
	if err != nil {
		d.fail(w, r, statusOf(err), err)
		return
	}
	var msg *core.PositionedMessage
	for i := range trace {
		if trace[i].ID == id {
			msg = &trace[i]
		}
	}
	if msg == nil {
		d.fail(w, r, http.StatusNotFound, fmt.Errorf("no message %s in the log (a scheduled message is shown once promoted)", id))
		return
	}
	d.render(w, r, "message", "log", "Message "+msg.Type, struct {
		Msg         core.PositionedMessage
		Payload     string
		Metadata    string
		Trace       []*traceNode
		Count       int
		Undecodable string
		States      []stateLink
	}{*msg, payloadJSON(msg.Message), prettyJSON(msg.Metadata), traceTree(trace, id), len(trace), "", d.stateLinks(*msg)})
}

func (d *Dashboard) scheduledPage(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	data := struct {
		Supported   bool
		Messages    []logRow
		Next        time.Time
		Count       int64
		Undecodable string
	}{}
	st, err := d.store.Stats(ctx)
	if err != nil {
		d.fail(w, r, statusOf(err), err)
		return
	}
	data.Count = st.Scheduled
	if next, ok, err := d.store.NextScheduled(ctx); err == nil && ok {
		data.Next = next
	}
	if sr, ok := d.store.(driver.ScheduleReader); ok {
		data.Supported = true
		msgs, err := sr.ReadScheduled(ctx, 200)
		var de *shell.DecodeError
		if errors.As(err, &de) {
			// The list cannot be read around it (it has no cursor): say so.
			data.Undecodable = de.Error()
			err, msgs = nil, nil
		}
		if err != nil {
			d.fail(w, r, statusOf(err), err)
			return
		}
		for _, m := range msgs {
			data.Messages = append(data.Messages, rowOf(core.PositionedMessage{Message: m}))
		}
	}
	d.render(w, r, "scheduled", "scheduled", "Scheduled messages", data)
}

// live streams server-sent events: "append" with the types of each
// committed append, and a comment every 15 s to keep the connection open.
func (d *Dashboard) live(w http.ResponseWriter, r *http.Request) {
	fl, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusNotImplemented)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	ch := make(chan []string, 16)
	unsubscribe := d.store.Notifier().Subscribe(func(types []string) {
		select {
		case ch <- types:
		default: // the client is behind: it refreshes anyway
		}
	})
	defer unsubscribe()
	fmt.Fprint(w, ": live\n\n")
	fl.Flush()
	tick := time.NewTicker(15 * time.Second)
	defer tick.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case types := <-ch:
			js, _ := json.Marshal(types)
			fmt.Fprintf(w, "event: append\ndata: %s\n\n", js)
			fl.Flush()
		case <-tick.C:
			fmt.Fprint(w, ": ping\n\n")
			fl.Flush()
		}
	}
}

// prettyJSON renders v (raw JSON or a value) indented.
func prettyJSON(v any) string {
	var raw []byte
	switch x := v.(type) {
	case nil:
		return ""
	case json.RawMessage:
		raw = x
	case []byte:
		raw = x
	default:
		b, err := json.Marshal(v)
		if err != nil {
			return fmt.Sprint(v)
		}
		raw = b
	}
	var out strings.Builder
	var anyV any
	if err := json.Unmarshal(raw, &anyV); err != nil {
		return string(raw)
	}
	b, _ := json.MarshalIndent(anyV, "", "  ")
	out.Write(b)
	return out.String()
}

func compactJSON(v any) string {
	switch x := v.(type) {
	case json.RawMessage:
		return string(x)
	case nil:
		return ""
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}
