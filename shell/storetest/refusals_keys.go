package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell/driver"
)

// testEmptyPartitionValues: a message holding an empty value for a
// partition key of a registered group handling its type is refused at
// append (it would open a partition no worker can load, and stop the
// group), with a *codec.ValidationError naming the attribute and nothing
// written; an empty value no such group partitions by, and an optional key
// left out, are appended.
func (s suite) testEmptyPartitionValues(t *testing.T) {
	reviews := driver.GroupSpec{ID: "storetest.reviews", PartitionBy: []string{"course_name", "user_id"}, Handled: []string{typeCourseCreated, typeCourseReviewed}}
	empty := ""

	refused := func(e *genv, field string, payloads ...any) {
		e.t.Helper()
		e.notes.take()
		before := e.snapshot()
		check := func(how string, err error) {
			e.t.Helper()
			var ve *codec.ValidationError
			if !errors.Is(err, codec.ErrInvalid) || !errors.As(err, &ve) {
				e.t.Fatalf("%s %v: error %v, want a *codec.ValidationError", how, payloads, err)
			}
			if len(ve.Fields) != 1 || ve.Fields[0].Field != field {
				e.t.Fatalf("%s %v: error %v, want one problem, with %s", how, payloads, err, field)
			}
			e.unchanged(before)
		}
		_, err := e.store.Append(e.ctx, msgs(payloads...), driver.AppendOptions{})
		check("append", err)
		check("append in a transaction", e.update(func(tx driver.Tx, _ driver.GroupTx) error {
			_, err := tx.Append(msgs(payloads...), driver.AppendOptions{})
			return err
		}))
	}

	t.Run("refused for a handled type", func(t *testing.T) {
		e := s.genv(t, devices, enrolments, accounts)
		e.append(deviceRegistered{DeviceID: "d1", Name: "a"})
		refused(e, "device_id", deviceRegistered{DeviceID: "", Name: "b"})
		// Anywhere in a batch: nothing of it is written.
		refused(e, "device_id", deviceRegistered{DeviceID: "d2", Name: "b"}, deviceRegistered{DeviceID: "", Name: "c"})
		// A key of a group partitioned by two attributes, carried alone.
		refused(e, "course_name", courseCreated{CourseName: ""})
		refused(e, "user_id", userJoinedCourse{CourseName: "Algebra", UserID: ""})
		// One empty value of a list attribute.
		refused(e, "accounts", transfer{Accounts: []string{"a1", ""}, Amount: 1})
		// Dated in the future: refused now, not when it falls due.
		refused(e, "device_id", core.NewMessage(deviceRegistered{DeviceID: "", Name: "d"}).At(epoch.Add(time.Hour)))
		// The group still claims what was appended before.
		e.expectClaim(e.claim(devices, "w1", 10), part("device_id", "d1"), false, 1)
	})

	t.Run("appended when no group handling the type partitions by it", func(t *testing.T) {
		e := s.genv(t, devices, bindings)
		e.register(reviews)
		res := e.append(
			deviceRegistered{DeviceID: "d1", Name: ""},      // name is no partition key
			deviceBound{"d1", ""},                           // nor is asset_id, for bindings
			assetRegistered{AssetID: "", Label: "no group"}, // no group handles it
			userRegistered{UserID: "", Name: "no group"},    // enrolments is not registered here
			courseReviewed{"Algebra", nil},                  // an optional key left out
			transfer{Accounts: []string{""}, Amount: 1},     // accounts is not registered here
		)
		if len(res.Positions) != 6 || res.Last != 6 {
			t.Fatalf("appended %v, want six positions", res.Positions)
		}
		refused(e, "user_id", courseReviewed{"Algebra", &empty})
	})
}
