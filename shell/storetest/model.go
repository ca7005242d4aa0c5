package storetest

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"pgregory.net/rapid"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell/driver"
)

// testModel checks the store against a model, a slice of messages and a
// slice of scheduled ones, over random sequences of appends (guarded or
// not, in transactions committed or rolled back, with invalid payloads,
// duplicate ids and future dates), condition reads, partition reads, pages
// of the log and promotions with an advancing clock. After every step the
// whole log and the figures of the store must be the model's.
func (s suite) testModel(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		e, release := s.scopedEnv(t, rt)
		defer release()
		m := &model{e: e, promoted: map[uuid.UUID]time.Time{}, dirty: true}
		rt.Repeat(map[string]func(*rapid.T){
			"append":         m.append,
			"append more":    m.append, // appends weigh double: reads need a log
			"read":           m.read,
			"read partition": m.readPartition,
			"read all":       m.readAll,
			"promote":        m.promote,
			"tick":           m.tick,
			"next scheduled": m.nextScheduled,
			"":               m.check,
		})
	})
}

// scopedEnv opens a store for one rapid check. The store is opened in a
// subtest of t that lasts until release is called, so that the cleanup the
// factory registers runs after each check rather than piling up until the
// end of the whole property.
func (s suite) scopedEnv(t *testing.T, rt *rapid.T) (*env, func()) {
	reg, err := NewRegistry()
	if err != nil {
		rt.Fatalf("fixture registry: %v", err)
	}
	c, rec := newClock(), newRecorder()
	opened := make(chan driver.Store, 1)
	done, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		t.Run("store", func(st *testing.T) {
			sent := false
			defer func() {
				if !sent {
					opened <- nil
				}
			}()
			store := s.open(st, reg, c.Now, rec)
			opened <- store
			sent = true
			<-done
		})
	}()
	release := func() {
		close(done)
		<-finished
	}
	store := <-opened
	if store == nil {
		release()
		rt.Fatalf("the factory did not open a store")
	}
	return &env{t: rt, ctx: t.Context(), store: store, reg: reg, clock: c, notes: rec}, release
}

type model struct {
	e        *env
	log      []core.PositionedMessage // what the store's log must hold
	sched    []core.Message           // the schedule, in scheduling order
	promoted map[uuid.UUID]time.Time  // promotion time of promoted messages
	free     []uuid.UUID              // ids of messages that were not kept
	dirty    bool                     // whether the store may have changed since the last check
}

func (m *model) gen(t *rapid.T) gen {
	return gen{
		pick:  func(n int, label string) int { return rapid.IntRange(0, n-1).Draw(t, label) },
		reg:   m.e.reg,
		types: allTypes,
	}
}

// last is the newest position of the log.
func (m *model) last() int64 {
	if len(m.log) == 0 {
		return 0
	}
	return m.log[len(m.log)-1].Position
}

func (m *model) keys(msg core.Message) []codec.KeyPair { return keysOf(m.e.reg, msg.Payload) }

// ids are the ids the store holds, in the log and the schedule.
func (m *model) ids() []uuid.UUID {
	out := idsOf(m.log)
	for _, s := range m.sched {
		out = append(out, s.ID)
	}
	return out
}

func (m *model) append(t *rapid.T) {
	m.dirty = true
	e := m.e.with(t)
	g := m.gen(t)
	now := e.clock.Now()

	// The batch, with what should make it fail.
	var wantErrs []error
	n := rapid.IntRange(1, 3).Draw(t, "batch size")
	batch := make([]core.Message, n)
	taken := m.ids()
	for i := range batch {
		var msg core.Message
		if rapid.IntRange(0, 39).Draw(t, "invalid") == 0 {
			msg = core.NewMessage(signup{})
			wantErrs = append(wantErrs, codec.ErrInvalid)
		} else {
			msg = core.NewMessage(g.payload())
		}
		switch rapid.IntRange(0, 7).Draw(t, "date") {
		case 0, 1:
			msg = msg.At(now.Add(time.Duration(rapid.IntRange(1, 8).Draw(t, "quarter seconds ahead")) * 250 * time.Millisecond))
		case 2:
			msg = msg.At(now.Add(-time.Second))
		}
		switch rapid.IntRange(0, 19).Draw(t, "id") {
		case 0:
			msg.ID = uuid.Must(uuid.NewV7())
		case 1:
			if len(taken) > 0 {
				msg.ID = taken[rapid.IntRange(0, len(taken)-1).Draw(t, "duplicate of")]
				wantErrs = append(wantErrs, driver.ErrDuplicateID)
			}
		case 2:
			// The id of a message whose append failed or rolled back is
			// free again.
			free := slices.DeleteFunc(slices.Clone(m.free), func(id uuid.UUID) bool { return slices.Contains(taken, id) })
			if len(free) > 0 {
				msg.ID = free[rapid.IntRange(0, len(free)-1).Draw(t, "free id")]
			}
		}
		if msg.ID != uuid.Nil {
			taken = append(taken, msg.ID)
		}
		if rapid.IntRange(0, 4).Draw(t, "metadata") == 0 {
			msg.Metadata = map[string]any{"k": fmt.Sprint("v", i), "n": float64(i)}
		}
		batch[i] = msg
	}

	// The guard: none, made up from the model, or read from the store and
	// made stale.
	var opts driver.AppendOptions
	switch rapid.IntRange(0, 3).Draw(t, "guard") {
	case 1:
		opts.Guard = &core.Guard{
			Conditions:   g.conditions(0, 2),
			LastPosition: rapid.Int64Range(0, m.last()).Draw(t, "guard position"),
		}
	case 2, 3:
		p := g.partition()
		read, err := e.store.ReadPartition(e.ctx, p, g.partitionTypes(p), driver.ReadOptions{})
		if err != nil {
			t.Fatalf("read partition: %v", err)
		}
		read.Guard.LastPosition = rapid.Int64Range(0, read.Guard.LastPosition).Draw(t, "guard position")
		opts.Guard = &read.Guard
	}
	// Append, alone or in a transaction that commits or rolls back, after
	// another append of the transaction (the prelude) or not.
	mode := rapid.SampledFrom([]string{"append", "append", "append", "update", "update", "rolled back update"}).Draw(t, "mode")
	var prelude []core.Message
	if mode != "append" && rapid.IntRange(0, 2).Draw(t, "prelude?") == 0 {
		prelude = msgs(g.payload())
	}
	var res, pres driver.AppendResult
	var err error
	switch mode {
	case "append":
		res, err = e.store.Append(e.ctx, batch, opts)
	default:
		err = e.store.Update(e.ctx, func(tx driver.Tx) error {
			if prelude != nil {
				var perr error
				if pres, perr = tx.Append(prelude, driver.AppendOptions{}); perr != nil {
					t.Fatalf("prelude append: %v", perr)
				}
			}
			var aerr error
			res, aerr = tx.Append(batch, opts)
			if aerr == nil && mode == "rolled back update" {
				return errRollback
			}
			return aerr
		})
	}

	// What the guard should have found: the log, and the prelude.
	base := m.log
	if prelude != nil {
		pm := pres.Messages[0]
		pm.Payload = prelude[0].Payload
		base = append(slices.Clone(m.log), core.PositionedMessage{Message: pm, Position: pres.Positions[0]})
	}
	var conflicts []core.PositionedMessage
	if opts.Guard != nil {
		conflicts = opts.Guard.Conflicting(base, func(pm core.PositionedMessage) []codec.KeyPair { return m.keys(pm.Message) })
		if len(conflicts) > 0 {
			wantErrs = append(wantErrs, core.ErrConcurrentAppend)
		}
	}

	if len(wantErrs) > 0 {
		if err == nil {
			t.Fatalf("append succeeded at %v, want one of %v", res.Positions, wantErrs)
		}
		if !slices.ContainsFunc(wantErrs, func(w error) bool { return errors.Is(err, w) }) {
			t.Fatalf("append: error %v, want one of %v", err, wantErrs)
		}
		var ce *core.ConflictError
		if len(wantErrs) == 1 && errors.As(err, &ce) {
			m.same("conflicts", ce.Conflicts, conflicts)
		}
		e.expectNotes()
		m.freeIDs(batch)
		m.freeIDs(pres.Messages)
		return
	}
	if mode == "rolled back update" {
		if !errors.Is(err, errRollback) {
			t.Fatalf("rolled back update: %v", err)
		}
		e.expectNotes()
		m.freeIDs(res.Messages)
		m.freeIDs(pres.Messages)
		return
	}
	if err != nil {
		t.Fatalf("append: %v", err)
	}

	if len(res.Positions) != n || len(res.Messages) != n {
		t.Fatalf("append of %d returned %d positions and %d messages", n, len(res.Positions), len(res.Messages))
	}
	var logged, all []string
	if prelude != nil {
		m.log = base
		logged, all = []string{base[len(base)-1].Type}, []string{base[len(base)-1].Type}
	}
	var last int64 // the batch's last position
	for i, in := range batch {
		got := res.Messages[i]
		typ, _ := e.reg.TypeOf(in.Payload)
		switch {
		case got.Type != typ.Name:
			t.Fatalf("message %d: type %q, want %q", i, got.Type, typ.Name)
		case in.ID != uuid.Nil && got.ID != in.ID, in.ID == uuid.Nil && got.ID.Version() != 7:
			t.Fatalf("message %d: id %s, want the given %s or a new UUID v7", i, got.ID, in.ID)
		case got.CausationID != got.ID || got.CorrelationID != got.ID:
			t.Fatalf("message %d: causation %s correlation %s, want its id %s", i, got.CausationID, got.CorrelationID, got.ID)
		case in.CreatedAt.IsZero() && !got.CreatedAt.Equal(now), !in.CreatedAt.IsZero() && !got.CreatedAt.Equal(in.CreatedAt):
			t.Fatalf("message %d: created at %v, want the given %v or now %v", i, got.CreatedAt, in.CreatedAt, now)
		}
		got.Payload, got.Metadata = in.Payload, in.Metadata
		all = append(all, got.Type)
		if got.CreatedAt.After(now) {
			if res.Positions[i] != 0 {
				t.Fatalf("message %d is dated %v, after now %v, but was logged at %d", i, got.CreatedAt, now, res.Positions[i])
			}
			m.sched = append(m.sched, got)
			continue
		}
		if skips(e.store) {
			if p := res.Positions[i]; p <= max(last, m.last()) {
				t.Fatalf("message %d: position %d, want one after %d", i, p, max(last, m.last()))
			}
			last = res.Positions[i]
		} else if last = m.last() + 1; res.Positions[i] != last {
			t.Fatalf("message %d: position %d, want %d", i, res.Positions[i], last)
		}
		m.log = append(m.log, core.PositionedMessage{Message: got, Position: last})
		logged = append(logged, got.Type)
	}
	if res.Last != last {
		t.Fatalf("last position %d, want %d", res.Last, last)
	}
	m.expectAnnounced(logged, all)
}

// freeIDs notes the ids of msgs, which the store did not keep.
func (m *model) freeIDs(msgs []core.Message) {
	for _, msg := range msgs {
		if msg.ID != uuid.Nil && !slices.Contains(m.free, msg.ID) {
			m.free = append(m.free, msg.ID)
		}
	}
}

// expectAnnounced checks the notifications of one commit: when messages
// were logged, one notification naming each logged type and no type
// outside the batch (announcing the types of scheduled messages too is
// allowed); when everything was scheduled, at most one.
func (m *model) expectAnnounced(logged, all []string) {
	e := m.e
	notes := e.notes.take()
	if len(logged) == 0 {
		if len(notes) > 1 {
			e.t.Fatalf("notifications %v for an append that only scheduled", notes)
		}
		return
	}
	if len(notes) != 1 {
		e.t.Fatalf("notifications %v, want one naming %v", notes, logged)
	}
	for _, typ := range logged {
		if !slices.Contains(notes[0], typ) {
			e.t.Fatalf("notification %v does not name the logged type %s", notes[0], typ)
		}
	}
	for _, typ := range notes[0] {
		if !slices.Contains(all, typ) {
			e.t.Fatalf("notification %v names %s, which was not appended", notes[0], typ)
		}
	}
	if len(notes[0]) != len(slices.Compact(slices.Sorted(slices.Values(notes[0])))) {
		e.t.Fatalf("notification %v repeats a type", notes[0])
	}
}

// readOptions draws bounds around the model's log.
func (m *model) readOptions(t *rapid.T) driver.ReadOptions {
	var opts driver.ReadOptions
	if rapid.Bool().Draw(t, "after?") {
		opts.After = rapid.Int64Range(0, m.last()+1).Draw(t, "after")
	}
	if rapid.IntRange(0, 2).Draw(t, "upto?") == 0 {
		opts.Upto = rapid.Int64Range(1, m.last()+1).Draw(t, "upto")
	}
	if rapid.Bool().Draw(t, "limit?") {
		opts.Limit = rapid.IntRange(1, 4).Draw(t, "limit")
	}
	return opts
}

// expectRead checks a read against the model: the messages are those of
// the model's log that match, within opts, and the guard's position
// follows the rules of driver.Tx.Read.
func (m *model) expectRead(got driver.ReadResult, match func(core.PositionedMessage) bool, opts driver.ReadOptions) {
	var want []core.PositionedMessage
	more := false
	for _, pm := range m.log {
		if pm.Position <= opts.After || (opts.Upto > 0 && pm.Position > opts.Upto) || !match(pm) {
			continue
		}
		if opts.Limit > 0 && len(want) == opts.Limit {
			more = true
			break
		}
		want = append(want, pm)
	}
	m.same("read", got.Messages, want)
	bounded := m.last()
	if opts.Upto > 0 {
		bounded = min(opts.Upto, bounded)
	}
	pos := got.Guard.LastPosition
	switch {
	case opts.Limit > 0 && len(want) == opts.Limit && more:
		if pos != want[len(want)-1].Position {
			m.e.t.Fatalf("guard position %d, want %d: the last returned of a read cut short by its limit %+v", pos, want[len(want)-1].Position, opts)
		}
	case opts.Limit > 0 && len(want) == opts.Limit:
		// Exactly Limit messages and no more: the last returned and the
		// bound are equivalent guards (nothing matches between them).
		if pos != want[len(want)-1].Position && pos != bounded {
			m.e.t.Fatalf("guard position %d, want %d or %d (read %+v)", pos, want[len(want)-1].Position, bounded, opts)
		}
	default:
		if pos != bounded {
			m.e.t.Fatalf("guard position %d, want %d (read %+v)", pos, bounded, opts)
		}
	}
}

func (m *model) read(t *rapid.T) {
	e := m.e.with(t)
	conds := m.gen(t).conditions(0, 3)
	opts := m.readOptions(t)
	got := e.read(conds, opts)
	m.expectRead(got, func(pm core.PositionedMessage) bool {
		return len(conds) > 0 && core.MatchAny(conds, pm.Type, m.keys(pm.Message))
	}, opts)
	if !sameConds(got.Guard.Conditions, conds) {
		t.Fatalf("guard conditions %v, want %v", got.Guard.Conditions, conds)
	}
}

func (m *model) readPartition(t *rapid.T) {
	e := m.e.with(t)
	g := m.gen(t)
	p := g.partition()
	types := g.partitionTypes(p)
	opts := m.readOptions(t)
	got := e.readPartition(p, types, opts)
	m.expectRead(got, func(pm core.PositionedMessage) bool {
		return slices.Contains(types, pm.Type) && core.InPartition(p, m.keys(pm.Message))
	}, opts)
	typs := make([]*codec.Type, len(types))
	for i, name := range types {
		typs[i], _ = e.reg.ByName(name)
	}
	if want := core.ConditionsFor(p, typs...); !sameConds(got.Guard.Conditions, want) {
		t.Fatalf("guard conditions %v, want %v", got.Guard.Conditions, want)
	}
}

func (m *model) readAll(t *rapid.T) {
	e := m.e.with(t)
	opts := driver.ReadAllOptions{
		From:  rapid.Int64Range(0, m.last()+1).Draw(t, "from"),
		Limit: rapid.IntRange(0, 5).Draw(t, "limit"),
		Order: rapid.SampledFrom([]driver.Order{driver.Ascending, driver.Descending}).Draw(t, "order"),
	}
	if rapid.IntRange(0, 2).Draw(t, "conditions?") == 0 {
		opts.Conditions = m.gen(t).conditions(1, 2)
	}
	// Every message from the cursor on, in the order of the page.
	var want []core.PositionedMessage
	for _, pm := range m.log {
		if len(opts.Conditions) > 0 && !core.MatchAny(opts.Conditions, pm.Type, m.keys(pm.Message)) {
			continue
		}
		if opts.Order == driver.Descending && (opts.From == 0 || pm.Position <= opts.From) ||
			opts.Order == driver.Ascending && pm.Position >= opts.From {
			want = append(want, pm)
		}
	}
	if opts.Order == driver.Descending {
		slices.Reverse(want)
	}
	limit := opts.Limit
	if limit == 0 {
		limit = driver.DefaultPageSize
	}
	page := e.readAll(opts)
	m.same(fmt.Sprintf("page %+v", opts), page.Messages, want[:min(limit, len(want))])
	if page.LastPosition != m.last() {
		t.Fatalf("page last position %d, want %d", page.LastPosition, m.last())
	}
	if rapid.Bool().Draw(t, "all?") {
		var got []core.PositionedMessage
		for pm, err := range e.store.All(e.ctx, opts) {
			if err != nil {
				t.Fatalf("All: %v", err)
			}
			if got = append(got, pm); len(got) > len(m.log) {
				t.Fatalf("All %+v yields more messages than the log holds", opts)
			}
		}
		m.same(fmt.Sprintf("All %+v", opts), got, want)
	}
}

func (m *model) promote(t *rapid.T) {
	m.dirty = true
	e := m.e.with(t)
	now := e.clock.Advance(time.Duration(rapid.IntRange(0, 8).Draw(t, "quarter seconds")) * 250 * time.Millisecond)
	zone := rapid.SampledFrom([]*time.Location{time.UTC, time.FixedZone("UTC+5", 5*3600), time.FixedZone("UTC-8", -8*3600)}).Draw(t, "zone")
	n, err := e.store.PromoteScheduled(e.ctx, now.In(zone))
	if err != nil {
		t.Fatalf("promote: %v", err)
	}
	var kept []core.Message
	var types []string
	var promoted []uuid.UUID
	first := len(m.log)
	for _, s := range m.sched {
		if s.CreatedAt.After(now) {
			kept = append(kept, s)
			continue
		}
		m.log = append(m.log, core.PositionedMessage{Message: s, Position: m.last() + 1})
		m.promoted[s.ID] = now
		promoted = append(promoted, s.ID)
		if !slices.Contains(types, s.Type) {
			types = append(types, s.Type)
		}
	}
	if want := len(m.sched) - len(kept); n != want {
		t.Fatalf("promoted %d at %v, want %d", n, now, want)
	}
	m.sched = kept
	if skips(e.store) && len(promoted) > 0 {
		m.positionsOf(t, first, promoted)
	}
	if len(types) > 0 {
		e.expectNotes(types)
	} else {
		e.expectNotes()
	}
}

func (m *model) tick(t *rapid.T) {
	m.e.clock.Advance(time.Duration(rapid.IntRange(1, 4).Draw(t, "quarter seconds")) * 250 * time.Millisecond)
}

func (m *model) nextScheduled(t *rapid.T) {
	e := m.e.with(t)
	next, ok := e.nextScheduled()
	if len(m.sched) == 0 {
		if ok {
			t.Fatalf("next scheduled %v, want none", next)
		}
		return
	}
	want := slices.MinFunc(m.sched, func(a, b core.Message) int { return a.CreatedAt.Compare(b.CreatedAt) }).CreatedAt
	if !ok || !next.Equal(want) {
		t.Fatalf("next scheduled %v %v, want %v", next, ok, want)
	}
}

// check compares the whole store with the model after each step that may
// have written (reads are compared with the model as they are made).
func (m *model) check(t *rapid.T) {
	if !m.dirty {
		return
	}
	m.dirty = false
	e := m.e.with(t)
	m.same("log", e.log(), m.log)
	if st := e.stats(); st.MaxPosition != m.last() || st.Scheduled != int64(len(m.sched)) {
		t.Fatalf("stats %+v, want max position %d and %d scheduled", st, m.last(), len(m.sched))
	}
}

// same compares messages read from the store with the model's. A promoted
// message may carry either its due time or its promotion time, and a
// "scheduled_at" metadata entry.
func (m *model) same(what string, got, want []core.PositionedMessage) {
	m.e.t.Helper()
	want = slices.Clone(want)
	got = slices.Clone(got)
	for i := range min(len(got), len(want)) {
		at, ok := m.promoted[want[i].ID]
		if !ok || got[i].ID != want[i].ID {
			continue
		}
		if got[i].CreatedAt.Equal(at) {
			want[i].CreatedAt = at
		}
		if _, has := got[i].Metadata["scheduled_at"]; has {
			md := maps.Clone(got[i].Metadata)
			delete(md, "scheduled_at")
			got[i].Metadata = md
		}
	}
	if err := diffMessages(got, want); err != nil {
		m.e.t.Fatalf("%s: %v", what, err)
	}
}

// positionsOf sets the positions of the messages promoted (ids, from
// m.log[first] on) from the store, for a store whose positions may skip:
// they follow the log in the order promoted.
func (m *model) positionsOf(t *rapid.T, first int, ids []uuid.UUID) {
	e := m.e.with(t)
	var from int64
	if first > 0 {
		from = m.log[first-1].Position + 1
	}
	page, err := e.store.ReadAll(e.ctx, driver.ReadAllOptions{From: from, Limit: len(ids) + 1})
	if err != nil {
		t.Fatalf("read the promoted messages: %v", err)
	}
	if len(page.Messages) != len(ids) {
		t.Fatalf("promoted %d messages, the log has %d after %d", len(ids), len(page.Messages), from-1)
	}
	prev := from - 1
	for i, pm := range page.Messages {
		if pm.ID != ids[i] || pm.Position <= prev {
			t.Fatalf("promoted message %d: %s at %d, want %s after %d", i, pm.ID, pm.Position, ids[i], prev)
		}
		m.log[first+i].Position, prev = pm.Position, pm.Position
	}
}
