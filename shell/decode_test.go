package shell_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"zombiezen.com/go/sqlite/sqlitex"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell"
	"github.com/sourced-go/sourced/shell/sqlitestore"
)

// A claim that meets a message it cannot decode is the group's failure,
// never "nothing to do": the error strategy applies, the group fails, and
// its failure names the message's type (issue 28, item 1). Before, the
// claim's error was logged by the worker and the group stayed active,
// failing the same claim on every poll.
func TestUndecodableMessageFailsTheGroup(t *testing.T) {
	for _, pure := range []bool{false, true} {
		t.Run(fmt.Sprintf("pure=%v", pure), func(t *testing.T) {
			ctx := context.Background()
			s := &silent{pure: pure}
			rt, store := sqliteRouter(t, shell.RouterOptions{Logger: quiet()}, s)
			res, err := store.Append(ctx, []core.Message{
				core.NewMessage(NotifyStudent{StudentID: "s1"}),
				core.NewMessage(NotifyStudent{StudentID: "s2"}),
			}, shell.AppendOptions{})
			if err != nil {
				t.Fatal(err)
			}
			bad := res.Messages[1]
			err = store.Update(ctx, func(tx shell.Tx) error {
				conn, err := sqlitestore.Conn(tx)
				if err != nil {
					return err
				}
				// The payload struct changed incompatibly, without an upcaster.
				return sqlitex.Execute(conn, `UPDATE sourced_messages SET payload = '{"student_id": 7}' WHERE position = ?`,
					&sqlitex.ExecOptions{Args: []any{res.Positions[1]}})
			})
			if err != nil {
				t.Fatal(err)
			}
			err = rt.Drain(ctx, nil)
			var failed *shell.GroupFailedError
			var de *shell.DecodeError
			if !errors.As(err, &failed) || !errors.As(err, &de) {
				t.Fatalf("Drain = %v, want a *GroupFailedError for a *DecodeError", err)
			}
			if de.MessageType != "students.notify" || de.MessageID != bad.ID || de.Position != res.Positions[1] || de.Partition["student_id"] != "s2" {
				t.Fatalf("decode error = %+v, want message %s at %d in partition s2", de, bad.ID, res.Positions[1])
			}
			info, err := store.Group(ctx, s.GroupID())
			if err != nil {
				t.Fatal(err)
			}
			f := info.Failure
			if info.Status != shell.StatusFailed || f.MessageType != "students.notify" || f.MessageID != bad.ID.String() ||
				!strings.Contains(f.Error, "students.notify") || f.Partition != "student_id:s2" {
				t.Fatalf("group %s, failure %+v: want failed at the undecodable students.notify", info.Status, f)
			}
			// s1 was handled (a pure reactor's inline transaction, rolled
			// back by the failing claim, handles it again on its own).
			if n := s.count(); n != 1 && (!pure || n != 2) {
				t.Fatalf("reactor called %d times, want s1 handled", n)
			}
			if did, err := rt.HandleNext(ctx, s, "w"); did || err != nil {
				t.Fatalf("HandleNext on the failed group = %v, %v: want nothing to do", did, err)
			}
		})
	}
}
