package sqlitestore

import (
	"errors"
	"testing"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell/driver"
)

// Uninstall leaves the store a new writer connection (no statement cached
// against the dropped tables), set up like the first, with empty caches;
// on a private in-memory database too, whose contents live only as long as
// some connection is open.
func TestUninstallRenewsWriter(t *testing.T) {
	for _, tc := range []struct{ name, path string }{{"file", ""}, {"memory", ":memory:"}} {
		t.Run(tc.name, func(t *testing.T) {
			var s *Store
			if tc.path == "" {
				s = newTestStore(t, Options{})
			} else {
				reg := codec.NewRegistry()
				if err := errors.Join(codec.Register[ev](reg, "test.ev"), codec.Register[other](reg, "test.other")); err != nil {
					t.Fatal(err)
				}
				var err error
				if s, err = Install(t.Context(), tc.path, Options{Registry: reg}); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { s.Close() })
			}
			ctx := t.Context()
			if err := s.RegisterGroup(ctx, driver.GroupSpec{ID: "accounts", PartitionBy: []string{"account"}, Handled: []string{"test.ev"}}); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Append(ctx, []core.Message{core.NewMessage(ev{Account: "a1", Ref: "r1"})}, driver.AppendOptions{}); err != nil {
				t.Fatal(err)
			}
			w := <-s.writer
			before := w.conn
			s.writer <- w

			if err := s.Uninstall(ctx); err != nil {
				t.Fatal(err)
			}
			w = <-s.writer
			renewed, cached, groups := w.conn != before, len(w.cur)+len(w.old), w.groups
			fk := pragma(t, w.conn, "foreign_keys")
			s.writer <- w
			if !renewed {
				t.Fatal("the writer connection that prepared statements against the dropped tables is still in use")
			}
			if cached != 0 || groups != nil {
				t.Fatalf("the new writer has %d cached key pair ids and groups %v", cached, groups)
			}
			if fk != "1" {
				t.Fatalf("new writer: foreign_keys = %s, want 1", fk)
			}

			if err := s.Install(ctx); err != nil {
				t.Fatal(err)
			}
			res, err := s.Append(ctx, []core.Message{core.NewMessage(ev{Account: "a1", Ref: "r2"})}, driver.AppendOptions{})
			if err != nil || res.Last != 1 {
				t.Fatalf("append after reinstall: %+v, %v", res, err)
			}
			r, err := s.Read(ctx, []core.Condition{{Type: "test.ev", Attrs: map[string]string{"account": "a1"}}}, driver.ReadOptions{})
			if err != nil || len(r.Messages) != 1 || r.Messages[0].ID != res.Messages[0].ID {
				t.Fatalf("read after reinstall: %v, %v", r.Messages, err)
			}
		})
	}
}
