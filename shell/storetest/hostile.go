package storetest

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell/driver"
)

// Hostile input: payloads built to cost a store much, or to poison the
// log, are refused by the shared validation (codec.Validate and
// driver.PrepareMessage) on every store, whole and before anything is
// written, with an error wrapping codec.ErrInvalid.

// hostileLines is "hostile.lines": a list indexed from inside by an
// attribute that is not text (so no UTF-8 check walks it).
type hostileLines struct {
	Order string        `json:"order"`
	Lines []hostileLine `json:"lines" sourced:"index=qty"`
}

type hostileLine struct {
	Qty int `json:"qty"`
}

// hostileTags is "hostile.tags": an indexed list of scalars.
type hostileTags struct {
	Tags []string `json:"tags"`
}

// hostileWrapped is "hostile.wrapped": raw JSON wrapped one level deeper,
// as a workflow wraps its input.
type hostileWrapped struct {
	ID    string          `json:"id"`
	Input json.RawMessage `json:"input"`
}

func withHostile(reg *codec.Registry) error {
	return errors.Join(
		codec.Register[hostileLines](reg, "hostile.lines"),
		codec.Register[hostileTags](reg, "hostile.tags"),
		codec.Register[hostileWrapped](reg, "hostile.wrapped"),
	)
}

// deepJSON is a JSON array nested to encoding/json's depth limit (10,000):
// valid alone, one level too deep once wrapped in an object.
func deepJSON() json.RawMessage {
	const depth = 10_000
	return json.RawMessage(strings.Repeat("[", depth) + strings.Repeat("]", depth))
}

func (s suite) testHostileInput(t *testing.T) {
	lines := make([]hostileLine, codec.MaxNestedKeys+1)
	for i := range lines {
		lines[i].Qty = i
	}
	cases := []struct {
		name string
		msg  core.Message
		says string
	}{
		{"a nested list over codec.MaxNestedKeys", core.NewMessage(hostileLines{Order: "o1", Lines: lines}), "MaxNestedKeys"},
		{"more key pairs than codec.MaxKeyPairs", core.NewMessage(hostileTags{Tags: make([]string, codec.MaxKeyPairs+1)}), "MaxKeyPairs"},
		{"a payload that would not decode again", core.NewMessage(hostileWrapped{ID: "w1", Input: deepJSON()}), "decode again"},
		{"metadata that would not decode again", core.NewMessage(hostileTags{Tags: []string{"a"}}).WithMetadata(map[string]any{"input": deepJSON()}), "decode again"},
		{"a scheduled payload that would not decode again", core.NewMessage(hostileWrapped{ID: "w1", Input: deepJSON()}).At(epoch.Add(time.Hour)), "decode again"},
		{"a scheduled nested list over codec.MaxNestedKeys", core.NewMessage(hostileLines{Order: "o1", Lines: lines}).At(epoch.Add(time.Hour)), "MaxNestedKeys"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := s.envWith(t, withHostile)
			e.append(courseCreated{CourseName: "History"})
			e.expectNotes([]string{typeCourseCreated})
			before := e.snapshot()
			_, err := e.store.Append(e.ctx, []core.Message{core.NewMessage(userRegistered{UserID: "joe", Name: "Joe"}), c.msg}, driver.AppendOptions{})
			if !errors.Is(err, codec.ErrInvalid) || !strings.Contains(err.Error(), c.says) {
				t.Fatalf("append: %v, want an error wrapping codec.ErrInvalid saying %q", err, c.says)
			}
			if len(err.Error()) > 2000 {
				t.Fatalf("the refusal is %d bytes long: it repeats its input", len(err.Error()))
			}
			e.unchanged(before)
			// Inside a transaction, the refusal fails only that append.
			err = e.store.Update(e.ctx, func(tx driver.Tx) error {
				if _, err := tx.Append([]core.Message{c.msg}, driver.AppendOptions{}); !errors.Is(err, codec.ErrInvalid) {
					t.Errorf("append in a transaction: %v, want codec.ErrInvalid", err)
				}
				return errors.New("roll back")
			})
			if err == nil || err.Error() != "roll back" {
				t.Fatalf("update: %v", err)
			}
			e.unchanged(before)
		})
	}
	t.Run("at the limits, every value is indexed", func(t *testing.T) {
		e := s.envWith(t, withHostile)
		at := hostileLines{Order: "o1", Lines: lines[:codec.MaxNestedKeys]}
		e.append(at, hostileWrapped{ID: "w1", Input: json.RawMessage(strings.Repeat("[", 9_000) + strings.Repeat("]", 9_000))})
		res := e.read([]core.Condition{cond("hostile.lines", "qty", strconv.Itoa(codec.MaxNestedKeys-1))}, driver.ReadOptions{})
		e.expectPositions("read by the last element", res.Messages, 1)
		if got := e.log(); len(got) != 2 {
			t.Fatalf("log holds %d messages, want 2", len(got))
		}
	})
}
