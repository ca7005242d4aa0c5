package dashboard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell"
)

// MaxStateHistory is the most messages of a partition StateAt folds (and
// the most a decision's query read it lists): a partition with more up to
// the position asked is refused with ErrStateTooLong, so that one view
// costs a bounded read.
const MaxStateHistory = 10_000

// stepsShown is how many of the partition's messages before and after
// the position a PartitionState lists, to step through.
const stepsShown = 10

// Errors of StateAt, usable with errors.Is.
var (
	// ErrNoReactor: the group is not one of the reactors given, or its
	// reactor keeps no state to fold (a workflow).
	ErrNoReactor = errors.New("no reactor with a state to fold")
	// ErrStateTooLong: the partition has more than MaxStateHistory
	// messages up to the position.
	ErrStateTooLong = errors.New("partition history too long to fold here")
	// ErrBadPartition: the partition does not give the group's keys.
	ErrBadPartition = errors.New("partition does not match the group's keys")
)

// StateQuery asks for a reactor's state for one partition at a position.
type StateQuery struct {
	// Group is the reactor's consumer group.
	Group string
	// Partition gives a value for each of the group's partition keys.
	Partition core.Partition
	// At is the position the state is folded up to, included: 0 is
	// before the partition's first message, Latest (negative) its last.
	At int64
}

// Latest is StateQuery.At for the partition's last message.
const Latest int64 = -1

// StateMessage is a message of the log as a PartitionState lists it.
type StateMessage struct {
	Position    int64           `json:"position"`
	ID          uuid.UUID       `json:"id"`
	Type        string          `json:"type"`
	CausationID uuid.UUID       `json:"causation_id"`
	CreatedAt   time.Time       `json:"created_at"`
	Payload     json.RawMessage `json:"payload,omitempty"`
	// Role is what the message is to the reactor: "handled" (a command or
	// an event it reacts to), "evolved" (a fact its state folds), or both.
	Role string `json:"role,omitempty"`
}

// QueryPart is one part of a decision's query: its conditions, and the
// messages of the read that match them (the newest stepsShown*2; Matched
// counts them all).
type QueryPart struct {
	Conditions []string       `json:"conditions"`
	Matched    int            `json:"matched"`
	Read       []StateMessage `json:"read"`
}

// Decision is the message a reactor handles next after a position: the
// command (or the event it reacts to), the messages the log shows it
// caused, and, for a decision with a query of its own (core.Reads), each
// part of the query with what it read, as of just before the command (the
// decision read the log when it was handled: messages appended between
// the command and its handling are not shown).
type Decision struct {
	Message  StateMessage   `json:"message"`
	Produced []StateMessage `json:"produced"`
	Queries  []QueryPart    `json:"queries,omitempty"`
}

// PartitionState is what a reactor holds for a partition just after a
// position of the log: its state folded from the partition's messages up
// to it (a machine's context and active states), the message it handles
// next with what that produced, and the positions to step to.
type PartitionState struct {
	Group     string              `json:"group"`
	Kind      core.DefinitionKind `json:"kind"`
	Partition core.Partition      `json:"partition"`
	// At is the position the state is after (0: before the partition's
	// first message); Last is the partition's last position.
	At   int64 `json:"at"`
	Last int64 `json:"last"`
	// Folded counts the messages the state was folded from: all the
	// partition's up to At, or those after FromSnapshot.
	Folded int `json:"folded"`
	// FromSnapshot, when not 0, is the position of the decider's snapshot
	// the state was folded from: a partition with more than
	// MaxStateHistory messages up to At is folded from its latest
	// snapshot at or before At, when it has one.
	FromSnapshot int64 `json:"from_snapshot,omitempty"`
	// State is the state as JSON: a decider's or projector's state, a
	// machine's context.
	State json.RawMessage `json:"state"`
	// Paths are a machine's active states.
	Paths []string `json:"paths,omitempty"`
	// Prev and Next are the partition's positions before and after At, to
	// step to (0: none).
	Prev int64 `json:"prev"`
	Next int64 `json:"next"`
	// Before and After are the partition's messages around At (the last
	// stepsShown up to it, the first stepsShown after it).
	Before []StateMessage `json:"before"`
	After  []StateMessage `json:"after"`
	// Decision is the message handled next, when there is one.
	Decision *Decision `json:"decision,omitempty"`
}

// foldable is a reactor StateAt can fold.
type foldable struct {
	def      core.Definition
	kind     core.DefinitionKind
	spec     core.Spec
	evolved  map[string]bool
	handled  map[string]bool
	types    []string
	hasState bool
}

// foldableOf finds group's reactor among reactors.
func foldableOf(reg *codec.Registry, reactors []any, group string) (*foldable, error) {
	var known []string
	for _, r := range shell.Expand(reactors...) {
		def, ok := r.(core.Definition)
		if !ok {
			continue
		}
		spec := def.Spec()
		f := &foldable{def: def, spec: spec, evolved: map[string]bool{}, handled: map[string]bool{}}
		if d, ok := def.(core.Describer); ok {
			f.kind = d.Describe().Kind
		}
		_, folder := def.(core.Folder)
		f.hasState = folder || f.kind == core.KindMachine
		if !f.hasState || spec.LoadsState {
			continue
		}
		known = append(known, spec.Group)
		if spec.Group != group {
			continue
		}
		ev, err := reg.Names(spec.Evolved...)
		if err != nil {
			return nil, err
		}
		ha, err := reg.Names(spec.Handled...)
		if err != nil {
			return nil, err
		}
		for _, n := range ev {
			f.evolved[n] = true
		}
		for _, n := range ha {
			f.handled[n] = true
		}
		for _, n := range append(ev, ha...) {
			if !slices.Contains(f.types, n) {
				f.types = append(f.types, n)
			}
		}
		return f, nil
	}
	return nil, fmt.Errorf("%w: %q is not among the application's deciders, projectors and machines (those with state: %v)", ErrNoReactor, group, known)
}

// decoded returns m with its payload decoded by reg when the store read
// it raw (as the sourced tool opens stores).
func decoded(reg *codec.Registry, m core.PositionedMessage) (core.PositionedMessage, error) {
	raw, ok := m.Payload.(json.RawMessage)
	if !ok {
		return m, nil
	}
	v, err := reg.Decode(m.Type, 0, raw)
	if err != nil {
		return m, fmt.Errorf("message #%d (%s): %w", m.Position, m.Type, err)
	}
	m.Payload = v
	return m, nil
}

func (f *foldable) stateMessage(m core.PositionedMessage) StateMessage {
	sm := StateMessage{Position: m.Position, ID: m.ID, Type: m.Type, CausationID: m.CausationID, CreatedAt: m.CreatedAt}
	if b, err := json.Marshal(m.Payload); err == nil {
		sm.Payload = b
	}
	if f != nil {
		switch {
		case f.handled[m.Type] && f.evolved[m.Type]:
			sm.Role = "handled, evolved"
		case f.handled[m.Type]:
			sm.Role = "handled"
		case f.evolved[m.Type]:
			sm.Role = "evolved"
		}
	}
	return sm
}

// StateAt folds the state the reactor of q.Group (among reactors, the
// application's, with reg its registry) holds for q.Partition just after
// position q.At: deciders and projectors by their evolve handlers
// (core.Folder), machines by replaying their state events' moves and
// their context's evolve handlers (statechart.Machine.Load), from the
// log, so that any position can be asked for. A partition with more than
// MaxStateHistory messages up to the position is folded from the
// decider's latest snapshot (core.Snapshots) when that is at or before
// the position (FromSnapshot), and refused with ErrStateTooLong
// otherwise. It reads the partition's messages up to q.At (at most
// MaxStateHistory+1; again after the snapshot, when it is used), the
// next stepsShown after it, the correlation of the
// message handled next (for what it produced), and, when that is a
// decision with a query of its own, the query's union up to just before
// it (at most MaxStateHistory messages).
func StateAt(ctx context.Context, store shell.Store, reg *codec.Registry, reactors []any, q StateQuery) (PartitionState, error) {
	if reg == nil {
		reg = store.Registry()
	}
	f, err := foldableOf(reg, reactors, q.Group)
	if err != nil {
		return PartitionState{}, err
	}
	out := PartitionState{Group: f.spec.Group, Kind: f.kind, Partition: q.Partition, At: q.At}
	for _, k := range f.spec.PartitionBy {
		if q.Partition[k] == "" {
			return out, fmt.Errorf("%w: give %v (e.g. %s:VALUE), got %q", ErrBadPartition, f.spec.PartitionBy, k, core.Partition(q.Partition).String())
		}
	}
	for k := range q.Partition {
		if !slices.Contains(f.spec.PartitionBy, k) {
			return out, fmt.Errorf("%w: %q is not one of the keys %v", ErrBadPartition, k, f.spec.PartitionBy)
		}
	}
	var hist shell.ReadResult
	if q.At != 0 {
		hist, err = store.ReadPartition(ctx, q.Partition, f.types, shell.ReadOptions{Upto: max(q.At, 0), Limit: MaxStateHistory + 1})
		if err != nil {
			return out, err
		}
	}
	var start any
	if len(hist.Messages) > MaxStateHistory {
		// Too long to fold from the start: from the decider's snapshot,
		// when it has one at or before the position.
		var from int64
		start, from = f.snapshot(ctx, store, q.Partition, q.At)
		if start != nil {
			hist, err = store.ReadPartition(ctx, q.Partition, f.types, shell.ReadOptions{After: from, Upto: max(q.At, 0), Limit: MaxStateHistory + 1})
			if err != nil {
				return out, err
			}
			out.FromSnapshot = from
		}
	}
	if len(hist.Messages) > MaxStateHistory {
		upto := fmt.Sprintf("position %d", q.At)
		if q.At < 0 {
			upto = "its last"
		}
		if out.FromSnapshot > 0 {
			upto += fmt.Sprintf(" after its snapshot at %d", out.FromSnapshot)
		}
		return out, fmt.Errorf("%w: more than %d messages up to %s (dashboard.MaxStateHistory); a decider with snapshots (core.Snapshots) can be seen after its latest snapshot", ErrStateTooLong, MaxStateHistory, upto)
	}
	msgs := make([]core.PositionedMessage, 0, len(hist.Messages))
	for _, m := range hist.Messages {
		dm, err := decoded(reg, m)
		if err != nil {
			return out, err
		}
		msgs = append(msgs, dm)
	}
	if q.At < 0 {
		out.At = out.FromSnapshot
		if n := len(msgs); n > 0 {
			out.At = msgs[n-1].Position
		}
	}
	next, err := store.ReadPartition(ctx, q.Partition, f.types, shell.ReadOptions{After: out.At, Limit: stepsShown})
	if err != nil {
		return out, err
	}
	out.Last = out.At
	if n := len(next.Messages); n > 0 {
		out.Next = next.Messages[0].Position
		out.Last = next.Messages[n-1].Position
	}
	// Prev is the message before the last one folded (or the last one,
	// when At is between messages); from a snapshot, the snapshot's
	// position at most (the messages before it were not read).
	n := len(msgs)
	switch {
	case n > 0 && msgs[n-1].Position < out.At:
		out.Prev = msgs[n-1].Position
	case n > 1:
		out.Prev = msgs[n-2].Position
	case out.FromSnapshot > 0 && out.FromSnapshot < out.At:
		out.Prev = out.FromSnapshot
	}
	for _, m := range msgs[max(0, len(msgs)-stepsShown):] {
		out.Before = append(out.Before, f.stateMessage(m))
	}
	var evolved []core.PositionedMessage
	for _, m := range msgs {
		if f.evolved[m.Type] {
			evolved = append(evolved, m)
		}
	}
	out.Folded = len(evolved)
	state, paths, err := f.fold(q.Partition, start, evolved)
	if err != nil {
		return out, err
	}
	out.Paths = paths
	if out.State, err = json.Marshal(state); err != nil {
		out.State, _ = json.Marshal(fmt.Sprintf("%+v", state))
	}
	var handled *core.PositionedMessage
	for _, m := range next.Messages {
		dm, err := decoded(reg, m)
		if err != nil {
			return out, err
		}
		out.After = append(out.After, f.stateMessage(dm))
		if handled == nil && f.handled[m.Type] {
			handled = &dm
		}
	}
	if handled != nil {
		if out.Decision, err = f.decision(ctx, store, reg, *handled); err != nil {
			return out, err
		}
	}
	return out, nil
}

// snapshot returns the state of the decider's latest snapshot of
// partition and its position, when the decider takes snapshots, the store
// keeps them, and the snapshot is at or before position at (Latest: any);
// nil otherwise.
func (f *foldable) snapshot(ctx context.Context, store shell.Store, partition core.Partition, at int64) (any, int64) {
	sn, ok := f.def.(core.Snapshotting)
	if !ok {
		return nil, 0
	}
	ss, ok := store.(shell.SnapshotStore)
	if !ok {
		return nil, 0
	}
	codec, _, ok := sn.SnapshotPolicy()
	if !ok {
		return nil, 0
	}
	snap, found, err := ss.LoadSnapshot(ctx, f.spec.Group, core.Partition(partition).Key(), codec.Version())
	if err != nil || !found || (at >= 0 && snap.Position > at) {
		return nil, 0
	}
	state, err := codec.Decode(snap.State)
	if err != nil {
		return nil, 0
	}
	return state, snap.Position
}

// fold folds the evolved messages into the reactor's state: a Folder's
// state (from start, a snapshot's, when not nil), or a machine's context
// and active states.
func (f *foldable) fold(partition core.Partition, start any, evolved []core.PositionedMessage) (any, []string, error) {
	if fo, ok := f.def.(core.Folder); ok {
		if start == nil {
			start = fo.InitialState()
		}
		return fo.FoldState(start, evolved), nil, nil
	}
	// A statechart.Machine[C], whose Load returns an Instance[C]: called
	// by reflection, since the dashboard does not know C.
	load := reflect.ValueOf(f.def).MethodByName("Load")
	if !load.IsValid() {
		return nil, nil, fmt.Errorf("%w: %s cannot be folded", ErrNoReactor, f.spec.Group)
	}
	res := load.Call([]reflect.Value{reflect.ValueOf(partition), reflect.ValueOf(core.MessagesOf(evolved))})
	if err, _ := res[1].Interface().(error); err != nil {
		return nil, nil, err
	}
	inst := res[0]
	var paths []string
	if p := inst.MethodByName("Paths"); p.IsValid() {
		paths, _ = p.Call(nil)[0].Interface().([]string)
	}
	var ctxv any
	if c := inst.FieldByName("Context"); c.IsValid() {
		ctxv = c.Interface()
	}
	return ctxv, paths, nil
}

// decision is what m, the message handled next, produced, with its
// query's parts.
func (f *foldable) decision(ctx context.Context, store shell.Store, reg *codec.Registry, m core.PositionedMessage) (*Decision, error) {
	d := &Decision{Message: f.stateMessage(m)}
	chain, err := store.ReadCorrelation(ctx, m.ID)
	if err != nil {
		var de *shell.DecodeError
		if !errors.As(err, &de) {
			return nil, err
		}
		chain = nil // a message of the chain cannot be decoded: list none
	}
	for _, c := range chain {
		if c.CausationID == m.ID && c.ID != m.ID {
			d.Produced = append(d.Produced, f.stateMessage(c))
		}
	}
	qr, ok := f.def.(core.Querier)
	if !ok {
		return d, nil
	}
	plan, has, err := qr.QueryPlan(reg, m.Message)
	if err != nil || !has {
		return d, err
	}
	read, err := store.Read(ctx, plan.Union, shell.ReadOptions{Upto: m.Position - 1, Limit: MaxStateHistory})
	if err != nil {
		return nil, err
	}
	index := core.IndexWith(reg)
	type indexed struct {
		m    core.PositionedMessage
		typ  string
		keys []codec.KeyPair
	}
	ix := make([]indexed, 0, len(read.Messages))
	for _, r := range read.Messages {
		dm, err := decoded(reg, r)
		if err != nil {
			return nil, err
		}
		typ, keys := index(dm.Message)
		ix = append(ix, indexed{dm, typ, keys})
	}
	for _, conds := range plan.Parts {
		p := QueryPart{}
		for _, c := range conds {
			p.Conditions = append(p.Conditions, c.String())
		}
		var matched []core.PositionedMessage
		for _, x := range ix {
			for _, c := range conds {
				if c.Match(x.typ, x.keys) {
					matched = append(matched, x.m)
					break
				}
			}
		}
		p.Matched = len(matched)
		p.Read = []StateMessage{}
		for _, mm := range matched[max(0, len(matched)-2*stepsShown):] {
			p.Read = append(p.Read, f.stateMessage(mm))
		}
		d.Queries = append(d.Queries, p)
	}
	return d, nil
}

// stateURL is the state page of group for partition after position at
// (Latest: the last).
func stateURL(group string, partition core.Partition, at int64) string {
	v := url.Values{}
	v.Set("partition", core.Partition(partition).String())
	if at >= 0 {
		v.Set("at", strconv.FormatInt(at, 10))
	}
	return "/groups/" + url.PathEscape(group) + "/state?" + v.Encode()
}

// statePage is a partition's time travel: GET
// /groups/{id}/state?partition=k:v&at=N.
func (d *Dashboard) statePage(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	group := r.PathValue("id")
	q := StateQuery{Group: group, At: Latest}
	data := struct {
		Group        string
		PartitionKey string
		State        PartitionState
		StateJSON    string
		Chart        template.HTML
		PrevURL      string
		NextURL      string
		LastURL      string
		Err          string
	}{Group: group, PartitionKey: r.URL.Query().Get("partition")}
	status := http.StatusOK
	fail := func(code int, err error) {
		status, data.Err = code, err.Error()
	}
	p, err := core.ParsePartition(data.PartitionKey)
	switch {
	case data.PartitionKey == "":
		fail(http.StatusBadRequest, errors.New("give the partition, as ?partition=key:value (keys joined by |)"))
	case err != nil:
		fail(http.StatusBadRequest, err)
	default:
		q.Partition = p
	}
	if v := r.URL.Query().Get("at"); v != "" && data.Err == "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			fail(http.StatusBadRequest, fmt.Errorf("at %q: want a position of the log", v))
		}
		q.At = n
	}
	if data.Err == "" {
		st, err := StateAt(ctx, d.store, d.opts.Registry, d.opts.Reactors, q)
		var de *shell.DecodeError
		switch {
		case errors.As(err, &de):
			// The fold cannot go past a message the store cannot decode:
			// say which, rather than fail as the store's error.
			fail(http.StatusUnprocessableEntity, fmt.Errorf("the state cannot be folded: %w", err))
		case errors.Is(err, ErrNoReactor):
			fail(http.StatusNotFound, err)
		case errors.Is(err, ErrBadPartition), errors.Is(err, ErrStateTooLong):
			fail(http.StatusBadRequest, err)
		case err != nil:
			fail(statusOf(err), err)
		default:
			data.State = st
			data.StateJSON = prettyJSON(json.RawMessage(st.State))
			if st.At > 0 {
				data.PrevURL = stateURL(group, p, st.Prev)
			}
			if st.Next > 0 {
				data.NextURL = stateURL(group, p, st.Next)
				data.LastURL = stateURL(group, p, Latest)
			}
			if st.Kind == core.KindMachine {
				for _, m := range d.machines() {
					if m.Node.GroupID == st.Group {
						if c, err := chartHTML(m.Node.Chart, st.Paths); err == nil {
							data.Chart = c
						}
					}
				}
			}
		}
	}
	d.renderStatus(w, r, status, "state", "groups", "State of "+group, data)
}

// stateLink is a link to a reactor's state for the partition of a
// message.
type stateLink struct {
	Group, Partition, URL string
	At                    int64
}

// stateLinks are the state pages of the reactors m concerns (those that
// handle or evolve its type), for m's partition: just before m when a
// reactor handles it (so that the page shows it as the decision made
// next), just after it when the reactor only folds it.
func (d *Dashboard) stateLinks(m core.PositionedMessage) []stateLink {
	if len(d.opts.Reactors) == 0 || m.Position == 0 {
		return nil
	}
	reg := d.opts.Registry
	dm, err := decoded(reg, m)
	if err != nil {
		return nil
	}
	_, keys := core.IndexWith(reg)(dm.Message)
	var out []stateLink
	for _, r := range shell.Expand(d.opts.Reactors...) {
		def, ok := r.(core.Definition)
		if !ok {
			continue
		}
		f, err := foldableOf(reg, []any{def}, def.Spec().Group)
		if err != nil || len(f.spec.PartitionBy) == 0 || !(f.handled[m.Type] || f.evolved[m.Type]) {
			continue
		}
		p := map[string]string{}
		for _, k := range keys {
			if slices.Contains(f.spec.PartitionBy, k.Name) {
				p[k.Name] = k.Value
			}
		}
		if len(p) != len(f.spec.PartitionBy) {
			continue
		}
		at := m.Position
		if f.handled[m.Type] && !f.evolved[m.Type] {
			at--
		}
		out = append(out, stateLink{Group: f.spec.Group, Partition: core.Partition(p).String(), URL: stateURL(f.spec.Group, p, at), At: at})
	}
	return out
}

// cutJSON is raw JSON as text, cut to 200 characters.
func cutJSON(raw json.RawMessage) string {
	s := string(raw)
	if r := []rune(s); len(r) > 200 {
		s = string(r[:199]) + "…"
	}
	return s
}
