package storetest

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell/driver"
)

// testGroupModel checks consumer groups against a model over random
// interleavings of appends, claims by several workers, acks (alone or
// with an append in one Update, committed or rolled back), releases,
// advances, operator commands (stop, start, reset), worker commands
// (retry, fail) and ticks of the clock. Two groups run: enrolments
// (composite partitions, conditional AND) and accounts (a transfer belongs
// to the partition of each of its accounts). The invariants:
//
//   - a partition is held by at most one worker;
//   - a claim holds the partition's next messages, in order, exactly as
//     the model fetches them (conditional AND, handled types, after the
//     offset), with the guard and the replay flag the model expects;
//   - nothing acknowledged is delivered again unless the group was reset;
//   - a claim returns nothing only when the group may not be claimed or no
//     partition has pending work that no worker holds: a latched group
//     always claims a partition with pending work;
//   - a claimed partition is furthest behind among the store's offsets
//     with pending work;
//   - after every step the store's offsets, statuses, failures and highest
//     positions are the model's.
func (s suite) testGroupModel(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		e0, release := s.scopedEnv(t, rt)
		defer release()
		m := &groupModel{e: &genv{env: e0, gs: e0.store}}
		for _, id := range []string{enrolments, accounts} {
			spec := groupSpec(id)
			m.e.register(spec)
			m.groups = append(m.groups, &mgroup{spec: spec, status: driver.StatusActive, parts: map[string]*mpart{}})
		}
		rt.Repeat(map[string]func(*rapid.T){
			"append":        m.append,
			"append more":   m.append,
			"claim":         m.claim,
			"claim more":    m.claim,
			"claim again":   m.claim,
			"ack":           m.ack,
			"ack in update": m.ackInUpdate,
			"release":       m.release,
			"advance":       m.advance,
			"operator":      m.operate,
			"worker":        m.workerCommand,
			"tick":          m.tick,
			"":              m.check,
		})
	})
}

type groupModel struct {
	e      *genv
	log    []mmsg
	groups []*mgroup
	claims []*mclaim // claims handed out, some of them released or acked since
}

type mmsg struct {
	pos  int64
	typ  string
	keys []codec.KeyPair
}

type mgroup struct {
	spec    driver.GroupSpec
	status  driver.Status
	retryAt time.Time
	failure driver.Failure
	highest int64
	parts   map[string]*mpart // by core.Partition's String
	// replay holds, per partition, how far it had been acknowledged when the
	// group was last reset: claims up to there are replays.
	replay map[string]int64
}

type mpart struct {
	partition core.Partition
	last      int64
	holder    string
	offsetID  int64 // of the holder's claim
}

type mclaim struct {
	g   *mgroup
	c   *driver.ClaimedPartition
	key string
}

var modelWorkers = []string{"w1", "w2", "w3"}

func (m *groupModel) group(t *rapid.T) *mgroup {
	return m.groups[rapid.IntRange(0, len(m.groups)-1).Draw(t, "group")]
}

func (m *groupModel) part(g *mgroup, partition core.Partition) *mpart {
	key := core.Partition(partition).String()
	p := g.parts[key]
	if p == nil {
		p = &mpart{partition: maps.Clone(partition)}
		g.parts[key] = p
	}
	return p
}

// payload draws a message: course messages (some carrying both keys of
// enrolments, some one), transfers, and a type no group handles.
func (m *groupModel) payload(t *rapid.T) any {
	course := rapid.SampledFrom([]string{"Algebra", "History"}).Draw(t, "course")
	user := rapid.SampledFrom([]string{"joe", "jake"}).Draw(t, "user")
	switch rapid.IntRange(0, 8).Draw(t, "type") {
	case 0, 1, 2:
		return userJoinedCourse{CourseName: course, UserID: user}
	case 3:
		return courseCreated{CourseName: course}
	case 4:
		return userRegistered{UserID: user, Name: "x"}
	case 5:
		return courseClosed{CourseName: course}
	case 6, 7:
		var in []string
		for _, a := range []string{"acc1", "acc2", "acc3"} {
			if rapid.Bool().Draw(t, "with "+a) {
				in = append(in, a)
			}
		}
		if len(in) == 0 {
			in = []string{"acc1"}
		}
		return transfer{Accounts: in, Amount: 1}
	default:
		return deviceRegistered{DeviceID: "d1", Name: user}
	}
}

func (m *groupModel) logged(res driver.AppendResult) {
	for i, msg := range res.Messages {
		m.log = append(m.log, mmsg{pos: res.Positions[i], typ: msg.Type, keys: keysOf(m.e.reg, msg.Payload)})
	}
}

func (m *groupModel) append(t *rapid.T) {
	n := rapid.IntRange(1, 3).Draw(t, "messages")
	batch := make([]any, n)
	for i := range batch {
		batch[i] = m.payload(t)
	}
	res, err := m.e.gs.Append(m.e.ctx, msgs(batch...), driver.AppendOptions{})
	if err != nil {
		t.Fatalf("append: %v", err)
	}
	m.logged(res)
}

// tuples returns the partitions of g that msg carries in full.
func (g *mgroup) tuples(msg mmsg) []map[string]string {
	if !slices.Contains(g.spec.Handled, msg.typ) {
		return nil
	}
	out := []map[string]string{{}}
	for _, name := range g.spec.PartitionBy {
		var next []map[string]string
		for _, k := range msg.keys {
			if k.Name != name {
				continue
			}
			for _, p := range out {
				q := maps.Clone(p)
				q[name] = k.Value
				next = append(next, q)
			}
		}
		out = next
	}
	return out
}

// last is a partition's offset in the model (0 when it has none).
func (g *mgroup) last(key string) int64 {
	if p := g.parts[key]; p != nil {
		return p.last
	}
	return 0
}

// candidates are the partitions with pending work (a handled message
// carrying all their keys after the offset) that no worker holds.
func (m *groupModel) candidates(g *mgroup) map[string]map[string]string {
	out := map[string]map[string]string{}
	for _, msg := range m.log {
		for _, p := range g.tuples(msg) {
			key := core.Partition(p).String()
			if mp := g.parts[key]; mp != nil && mp.holder != "" {
				continue
			}
			if msg.pos > g.last(key) {
				out[key] = p
			}
		}
	}
	return out
}

// fetch is the model's claim fetch: up to n handled messages of the
// partition after last, under conditional AND.
func (m *groupModel) fetch(g *mgroup, partition core.Partition, last int64, n int) []int64 {
	var out []int64
	for _, msg := range m.log {
		if len(out) == n {
			break
		}
		if msg.pos > last && slices.Contains(g.spec.Handled, msg.typ) && core.InPartition(partition, msg.keys) {
			out = append(out, msg.pos)
		}
	}
	return out
}

func (m *groupModel) claim(t *rapid.T) {
	e := m.e.with(t)
	g := m.group(t)
	w := rapid.SampledFrom(modelWorkers).Draw(t, "worker")
	n := rapid.SampledFrom([]int{1, 1, 2, 3}).Draw(t, "batch size")
	known := map[string]bool{}
	for _, o := range e.offsets(g.spec.ID) {
		known[core.Partition(o.Partition).String()] = true
	}
	c, err := e.gs.ClaimNext(e.ctx, g.spec.ID, w, n)
	if err != nil {
		t.Fatalf("claim %s as %s: %v", g.spec.ID, w, err)
	}
	cands := m.candidates(g)
	if !driver.Claimable(g.status, g.retryAt, e.clock.Now()) || len(cands) == 0 {
		if c != nil {
			t.Fatalf("%s (%s) claimed %v with %s, but the model has nothing to claim", g.spec.ID, g.status, c.Partition, describe(c.Messages))
		}
		return
	}
	if c == nil {
		t.Fatalf("%s claimed nothing, but partitions %v have pending work that no worker holds", g.spec.ID, slices.Sorted(maps.Keys(cands)))
	}
	key := core.Partition(c.Partition).String()
	p := m.part(g, c.Partition)
	if p.holder != "" {
		t.Fatalf("%s: %s claimed %s, which %s holds", g.spec.ID, w, key, p.holder)
	}
	if _, ok := cands[key]; !ok {
		t.Fatalf("%s: claimed %s, which has no pending work (candidates %v)", g.spec.ID, key, slices.Sorted(maps.Keys(cands)))
	}
	for other := range cands {
		if known[other] && g.last(other) < p.last {
			t.Fatalf("%s: claimed %s at %d, but %s is further behind at %d", g.spec.ID, key, p.last, other, g.last(other))
		}
	}
	got := positionsOf(c.Messages)
	if want := m.fetch(g, c.Partition, p.last, n); !slices.Equal(got, want) {
		t.Fatalf("%s: claim of %s after %d holds %v, want %v", g.spec.ID, key, p.last, got, want)
	}
	if got[0] <= p.last {
		t.Fatalf("%s: %s delivered %d again, acknowledged up to %d", g.spec.ID, key, got[0], p.last)
	}
	if want := c.Last() <= g.replay[key]; c.Replaying != want {
		t.Fatalf("%s: claim of %s up to %d replaying %v, acknowledged up to %d before the last reset", g.spec.ID, key, c.Last(), c.Replaying, g.replay[key])
	}
	if c.ReplayUpto != g.replay[key] {
		t.Fatalf("%s: claim of %s up to %d: ReplayUpto %d, acknowledged up to %d before the last reset", g.spec.ID, key, c.Last(), c.ReplayUpto, g.replay[key])
	}
	wantConds := core.ConditionsFor(c.Partition, e.types(g.spec.Handled...)...)
	if c.Guard.LastPosition != c.Last() || !sameConds(c.Guard.Conditions, wantConds) {
		t.Fatalf("%s: claim guard %v at %d, want %v at %d", g.spec.ID, sortedConds(c.Guard.Conditions), c.Guard.LastPosition, sortedConds(wantConds), c.Last())
	}
	if c.WorkerID != w || c.Group != g.spec.ID {
		t.Fatalf("claim names %s and %s, want %s and %s", c.Group, c.WorkerID, g.spec.ID, w)
	}
	p.holder, p.offsetID = w, c.OffsetID
	m.claims = append(m.claims, &mclaim{g: g, c: c, key: key})
	if len(m.claims) > 8 {
		m.claims = m.claims[1:]
	}
}

// pick draws one of the claims handed out.
func (m *groupModel) pick(t *rapid.T) *mclaim {
	if len(m.claims) == 0 {
		t.Skip("no claim to settle")
	}
	return m.claims[rapid.IntRange(0, len(m.claims)-1).Draw(t, "claim")]
}

// held reports whether the claim's worker holds its partition (a claim
// object released and then claimed again by the same worker is held).
func (mc *mclaim) held() *mpart {
	p := mc.g.parts[mc.key]
	if p != nil && p.holder == mc.c.WorkerID && p.offsetID == mc.c.OffsetID {
		return p
	}
	return nil
}

// acked applies an ack to the model.
func (m *groupModel) acked(mc *mclaim, p *mpart, pos int64) {
	g := mc.g
	p.last = max(p.last, pos)
	p.holder, p.offsetID = "", 0
	g.highest = max(g.highest, pos)
	if g.status == driver.StatusRetrying && g.failure.OffsetID == mc.c.OffsetID {
		g.status, g.retryAt, g.failure = driver.StatusActive, time.Time{}, driver.Failure{}
	}
}

func (m *groupModel) ack(t *rapid.T) {
	mc := m.pick(t)
	pos := rapid.SampledFrom(positionsOf(mc.c.Messages)).Draw(t, "ack position")
	err := m.e.gs.Ack(m.e.ctx, mc.c, pos)
	p := mc.held()
	if p == nil {
		notClaimant(t, err, fmt.Sprintf("ack of %s %s by %s, which does not hold it", mc.g.spec.ID, mc.key, mc.c.WorkerID))
		return
	}
	if err != nil {
		t.Fatalf("ack %s %s at %d: %v", mc.g.spec.ID, mc.key, pos, err)
	}
	m.acked(mc, p, pos)
}

// ackInUpdate appends a message and acks a claim in one Update, which
// commits or rolls back.
func (m *groupModel) ackInUpdate(t *rapid.T) {
	mc := m.pick(t)
	pos := rapid.SampledFrom(positionsOf(mc.c.Messages)).Draw(t, "ack position")
	payload := m.payload(t)
	rollback := rapid.IntRange(0, 2).Draw(t, "rollback") == 0
	var res driver.AppendResult
	err := m.e.with(t).update(func(tx driver.Tx, gtx driver.GroupTx) error {
		var err error
		if res, err = tx.Append(msgs(payload), driver.AppendOptions{}); err != nil {
			return err
		}
		if err := gtx.Ack(mc.c, pos); err != nil {
			return err
		}
		if rollback {
			return errRollback
		}
		return nil
	})
	p := mc.held()
	switch {
	case p == nil && rollback && errors.Is(err, errRollback):
		// A store may defer an acknowledgement to the commit (see the
		// package doc, "Ack"): rolled back first, it never ran.
	case p == nil:
		notClaimant(t, err, fmt.Sprintf("ack of %s %s by %s in an Update", mc.g.spec.ID, mc.key, mc.c.WorkerID))
	case rollback:
		if !errors.Is(err, errRollback) {
			t.Fatalf("rolled back ack: %v", err)
		}
	case err != nil:
		t.Fatalf("ack %s %s at %d in an Update: %v", mc.g.spec.ID, mc.key, pos, err)
	default:
		m.logged(res)
		m.acked(mc, p, pos)
	}
}

func (m *groupModel) release(t *rapid.T) {
	mc := m.pick(t)
	err := m.e.gs.Release(m.e.ctx, mc.c)
	p := mc.held()
	if p == nil {
		notClaimant(t, err, fmt.Sprintf("release of %s %s by %s, which does not hold it", mc.g.spec.ID, mc.key, mc.c.WorkerID))
		return
	}
	if err != nil {
		t.Fatalf("release %s %s: %v", mc.g.spec.ID, mc.key, err)
	}
	p.holder, p.offsetID = "", 0
}

// advance moves an offset without a claim, as synchronous handling does.
func (m *groupModel) advance(t *rapid.T) {
	if len(m.log) == 0 {
		t.Skip("nothing to advance over")
	}
	g := m.group(t)
	partition := map[string]string{}
	for _, name := range g.spec.PartitionBy {
		var vs []string
		switch name {
		case "course_name":
			vs = []string{"Algebra", "History"}
		case "user_id":
			vs = []string{"joe", "jake"}
		case "accounts":
			vs = []string{"acc1", "acc2", "acc3"}
		}
		partition[name] = rapid.SampledFrom(vs).Draw(t, name)
	}
	pos := rapid.Int64Range(1, m.log[len(m.log)-1].pos).Draw(t, "position")
	var moved bool
	err := m.e.with(t).update(func(_ driver.Tx, gtx driver.GroupTx) error {
		var err error
		moved, err = gtx.AdvanceOffset(g.spec.ID, partition, pos)
		return err
	})
	if err != nil {
		t.Fatalf("advance %s %v to %d: %v", g.spec.ID, partition, pos, err)
	}
	p := m.part(g, partition)
	want := true
	if p.last < pos {
		for _, msg := range m.log {
			if msg.pos > p.last && msg.pos < pos && slices.Contains(g.spec.Handled, msg.typ) && core.InPartition(partition, msg.keys) {
				want = false
				break
			}
		}
		if want {
			p.last = pos
			g.highest = max(g.highest, pos)
		}
	}
	if moved != want {
		t.Fatalf("advance %s %v from %d to %d: %v, want %v", g.spec.ID, partition, p.last, pos, moved, want)
	}
}

func (m *groupModel) operate(t *rapid.T) {
	g := m.group(t)
	cmd := rapid.SampledFrom([]driver.GroupCommand{driver.CmdStop, driver.CmdStart, driver.CmdReset}).Draw(t, "command")
	var err error
	switch cmd {
	case driver.CmdStop:
		err = m.e.gs.StopGroup(m.e.ctx, g.spec.ID, "stopped by the model")
	case driver.CmdStart:
		err = m.e.gs.StartGroup(m.e.ctx, g.spec.ID)
	case driver.CmdReset:
		err = m.e.gs.ResetGroup(m.e.ctx, g.spec.ID)
	}
	next, terr := driver.Transition(g.spec.ID, g.status, cmd)
	if terr != nil {
		var ie *driver.InvalidTransitionError
		if !errors.As(err, &ie) {
			t.Fatalf("%s %s (%s): %v, want an *InvalidTransitionError", cmd, g.spec.ID, g.status, err)
		}
		return
	}
	if err != nil {
		t.Fatalf("%s %s (%s): %v", cmd, g.spec.ID, g.status, err)
	}
	g.status = next
	switch cmd {
	case driver.CmdStop:
		g.retryAt = time.Time{}
		g.failure.Reason = "stopped by the model"
	case driver.CmdStart:
		g.retryAt, g.failure = time.Time{}, driver.Failure{}
	case driver.CmdReset:
		if g.replay == nil {
			g.replay = map[string]int64{}
		}
		for key, p := range g.parts {
			g.replay[key] = max(g.replay[key], p.last)
		}
		g.parts = map[string]*mpart{}
		// The group's claims are void; drop them (a store may give a new
		// offset the id of a deleted one).
		m.claims = slices.DeleteFunc(m.claims, func(mc *mclaim) bool { return mc.g == g })
	}
}

func (m *groupModel) workerCommand(t *rapid.T) {
	g := m.group(t)
	f := driver.Failure{RetryCount: rapid.IntRange(1, 3).Draw(t, "retry count"), Error: "boom", ErrorType: "*errors.errorString"}
	var ids []int64
	for _, mc := range m.claims {
		if mc.g == g {
			ids = append(ids, mc.c.OffsetID)
		}
	}
	if len(ids) > 0 {
		f.OffsetID = rapid.SampledFrom(ids).Draw(t, "failed offset")
	}
	cmd := rapid.SampledFrom([]driver.GroupCommand{driver.CmdRetry, driver.CmdFail}).Draw(t, "command")
	var err error
	var at time.Time
	if cmd == driver.CmdRetry {
		at = m.e.clock.Now().Add(time.Duration(rapid.IntRange(0, 3).Draw(t, "retry in")) * time.Second)
		f.RetryAt = &at
		err = m.e.gs.RetryGroup(m.e.ctx, g.spec.ID, at, f)
	} else {
		err = m.e.gs.FailGroup(m.e.ctx, g.spec.ID, f)
	}
	if err != nil {
		t.Fatalf("%s %s: %v", cmd, g.spec.ID, err)
	}
	next, terr := driver.Transition(g.spec.ID, g.status, cmd)
	if terr != nil {
		return // a worker command leaves the group as it is
	}
	g.status, g.retryAt, g.failure = next, at, f
}

func (m *groupModel) tick(t *rapid.T) {
	m.e.clock.Advance(time.Second)
}

// check compares the store's groups and offsets with the model, and
// probes each group: a claim must find a partition exactly when the model
// has one with pending work that no worker holds (the probe releases it).
func (m *groupModel) check(t *rapid.T) {
	e := m.e.with(t)
	for _, g := range m.groups {
		c, err := e.gs.ClaimNext(e.ctx, g.spec.ID, "probe", 1)
		if err != nil {
			t.Fatalf("probe %s: %v", g.spec.ID, err)
		}
		cands := m.candidates(g)
		switch want := driver.Claimable(g.status, g.retryAt, e.clock.Now()) && len(cands) > 0; {
		case want && c == nil:
			t.Fatalf("probe of %s claimed nothing, but partitions %v have pending work that no worker holds", g.spec.ID, slices.Sorted(maps.Keys(cands)))
		case !want && c != nil:
			t.Fatalf("probe of %s (%s) claimed %v with %s, but the model has nothing to claim", g.spec.ID, g.status, c.Partition, describe(c.Messages))
		case c != nil:
			if _, ok := cands[core.Partition(c.Partition).String()]; !ok {
				t.Fatalf("probe of %s claimed %v, which has no pending work", g.spec.ID, c.Partition)
			}
			e.release(c)
		}

		info := e.info(g.spec.ID)
		if info.Status != g.status || info.HighestPosition != g.highest || !info.RetryAt.Equal(g.retryAt) || !sameFailure(info.Failure, g.failure) {
			t.Fatalf("%s: %+v, want status %s, highest %d, retry at %v, failure %+v", g.spec.ID, info, g.status, g.highest, g.retryAt, g.failure)
		}
		seen := map[string]bool{}
		for _, o := range e.offsets(g.spec.ID) {
			key := core.Partition(o.Partition).String()
			if seen[key] {
				t.Fatalf("%s: two offsets for %s", g.spec.ID, key)
			}
			seen[key] = true
			want := mpart{}
			if p := g.parts[key]; p != nil {
				want = *p
			}
			if o.LastPosition != want.last || o.Claimed != (want.holder != "") || o.ClaimedBy != want.holder || o.GroupStatus != g.status {
				t.Fatalf("%s: offset %+v, want at %d held by %q", g.spec.ID, o, want.last, want.holder)
			}
		}
		for key, p := range g.parts {
			if (p.last > 0 || p.holder != "") && !seen[key] {
				t.Fatalf("%s: no offset for %s, want at %d held by %q", g.spec.ID, key, p.last, p.holder)
			}
		}
	}
}

// String renders the model's state, for failures.
func (m *groupModel) String() string {
	var b strings.Builder
	for _, g := range m.groups {
		fmt.Fprintf(&b, "%s %s highest %d:", g.spec.ID, g.status, g.highest)
		for _, key := range slices.Sorted(maps.Keys(g.parts)) {
			p := g.parts[key]
			fmt.Fprintf(&b, " %s@%d/%s", key, p.last, p.holder)
		}
		b.WriteByte('\n')
	}
	return b.String()
}
