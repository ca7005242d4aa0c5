package storetest

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell/driver"
)

// lateRule is "storetest.late_rule": a payload whose Validate refuses
// Refuse, unless it is the value being scheduled (scheduling is not
// stored, so the payload promotion decodes lacks it). It stands for a
// message scheduled before a rule or a limit (codec.MaxIndexedValueBytes)
// it breaks was added: valid when scheduled, not when due.
type lateRule struct {
	Key    string `json:"key"`
	Refuse bool   `json:"refuse"`

	scheduling bool
}

// TypeLateRule is the type string of lateRule.
const typeLateRule = "storetest.late_rule"

func (p lateRule) Validate() error {
	if p.Refuse && !p.scheduling {
		return codec.FieldError{Field: "refuse", Problem: "is refused by a rule added after the message was scheduled"}
	}
	return nil
}

func withLateRule(reg *codec.Registry) error { return codec.Register[lateRule](reg, typeLateRule) }

// testUnpromotable holds PromoteScheduled to setting aside a due message
// it cannot append as it is (driver.CheckPromotable) instead of failing:
// every other due message is promoted, across the store's batches; the
// error is a *driver.UnpromotedError listing the set-aside messages, which
// stay in the schedule unchanged and are reported again at every call.
func (s suite) testUnpromotable(t *testing.T) {
	e := s.envWith(t, withLateRule)
	due := epoch.Add(time.Hour)
	const total = 230 // past a batch of every store but PostgreSQL's 500
	badAt := []int{0, 101, 229}
	var want, bad []uuid.UUID
	batch := make([]core.Message, 0, total)
	for i := range total {
		p := lateRule{Key: fmt.Sprint("k", i), scheduling: true}
		if slices.Contains(badAt, i) {
			p.Refuse = true
		}
		batch = append(batch, core.NewMessage(p).At(due))
	}
	res, err := e.store.Append(e.ctx, batch, driver.AppendOptions{})
	if err != nil {
		t.Fatalf("schedule: %v", err)
	}
	for i, m := range res.Messages {
		if slices.Contains(badAt, i) {
			bad = append(bad, m.ID)
		} else {
			want = append(want, m.ID)
		}
	}
	check := func(what string, n, wantN int, err error) {
		t.Helper()
		var ue *driver.UnpromotedError
		if !errors.Is(err, driver.ErrUnpromoted) || !errors.As(err, &ue) {
			t.Fatalf("%s: promoted %d, error %v, want a *driver.UnpromotedError", what, n, err)
		}
		if n != wantN {
			t.Fatalf("%s: promoted %d, want %d (%v)", what, n, wantN, err)
		}
		var got []uuid.UUID
		for _, m := range ue.Messages {
			got = append(got, m.ID)
			var ve *codec.ValidationError
			if m.Type != typeLateRule || !m.DueAt.Equal(due) || !errors.As(m.Err, &ve) {
				t.Fatalf("%s: set aside %+v, want a %s due at %v with its *codec.ValidationError", what, m, typeLateRule, due)
			}
		}
		if !slices.Equal(got, bad) {
			t.Fatalf("%s: set aside %v, want %v", what, got, bad)
		}
		if len(err.Error()) > 2000 {
			t.Fatalf("%s: the error is %d bytes long", what, len(err.Error()))
		}
	}
	n, err := e.store.PromoteScheduled(e.ctx, due)
	check("promote", n, total-len(bad), err)
	if got := idsOf(e.log()); !slices.Equal(got, want) {
		t.Fatalf("log holds %d messages, want the %d promotable ones in scheduling order", len(got), len(want))
	}
	if st := e.stats(); st.Scheduled != int64(len(bad)) {
		t.Fatalf("%d scheduled, want the %d set aside", st.Scheduled, len(bad))
	}
	if next, ok := e.nextScheduled(); !ok || !next.Equal(due) {
		t.Fatalf("next scheduled %v %v, want the set-aside messages, due %v", next, ok, due)
	}
	// Reported again, and what falls due later is promoted past them.
	e.append(core.NewMessage(lateRule{Key: "later"}).At(due.Add(time.Minute)))
	n, err = e.store.PromoteScheduled(e.ctx, due.Add(time.Minute))
	check("promote again", n, 1, err)
	if got := e.log(); len(got) != len(want)+1 || got[len(got)-1].Payload.(lateRule).Key != "later" {
		t.Fatalf("log holds %d messages, want %d ending with the later one", len(got), len(want)+1)
	}
}
