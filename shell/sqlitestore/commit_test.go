package sqlitestore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell/driver"
)

// Updates that queue up while another holds the writer share its commit
// (one commit for all), and each one's failure or panic rolls back only
// its own work: the others commit, and the notifier hears of the commit
// once, after it.
func TestGroupCommit(t *testing.T) {
	s := newTestStore(t, Options{})
	var notified [][]string
	var nmu sync.Mutex
	s.Notifier().Subscribe(func(types []string) {
		nmu.Lock()
		defer nmu.Unlock()
		notified = append(notified, types)
	})
	ctx := context.Background()
	appendOne := func(tx driver.Tx, ref string) error {
		_, err := tx.Append([]core.Message{core.NewMessage(ev{Account: "a", Ref: ref})}, driver.AppendOptions{})
		return err
	}
	before := s.commits.Load()
	held, release := make(chan struct{}), make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		err := s.Update(ctx, func(tx driver.Tx) error {
			close(held)
			<-release
			return appendOne(tx, "first")
		})
		if err != nil {
			t.Errorf("first: %v", err)
		}
	})
	<-held
	errs := make([]error, 6)
	panics := make([]any, 6)
	for i := range 6 {
		wg.Go(func() {
			defer func() { panics[i] = recover() }()
			errs[i] = s.Update(ctx, func(tx driver.Tx) error {
				if err := appendOne(tx, fmt.Sprint(i)); err != nil {
					return err
				}
				switch i {
				case 2:
					return fmt.Errorf("member %d fails", i)
				case 4:
					panic(fmt.Sprintf("member %d panics", i))
				}
				return nil
			})
		})
	}
	for s.waiting.Load() < 6 {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(20 * time.Millisecond) // all six blocked on the writer
	nmu.Lock()
	if len(notified) != 0 {
		t.Errorf("notified %v before the commit", notified)
	}
	nmu.Unlock()
	close(release)
	wg.Wait()

	if n := s.commits.Load() - before; n != 1 {
		t.Errorf("%d commits for 7 queued updates, want 1", n)
	}
	for i := range 6 {
		switch i {
		case 2:
			if errs[i] == nil || errs[i].Error() != "member 2 fails" {
				t.Errorf("member 2: %v, want its own error", errs[i])
			}
		case 4:
			if panics[i] != "member 4 panics" {
				t.Errorf("member 4: recovered %v, want its panic", panics[i])
			}
		default:
			if errs[i] != nil || panics[i] != nil {
				t.Errorf("member %d: %v %v", i, errs[i], panics[i])
			}
		}
	}
	res, err := s.ReadAll(ctx, driver.ReadAllOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var refs []string
	for _, m := range res.Messages {
		refs = append(refs, m.Payload.(ev).Ref)
	}
	slices.Sort(refs)
	if want := []string{"0", "1", "3", "5", "first"}; !slices.Equal(refs, want) {
		t.Fatalf("log holds %v, want %v", refs, want)
	}
	nmu.Lock()
	defer nmu.Unlock()
	if len(notified) != 1 || !slices.Equal(notified[0], []string{"test.ev"}) {
		t.Fatalf("notified %v, want one announcement of test.ev", notified)
	}
}

// A member whose context ends while it waits for the writer gives up
// without harming the group; one whose context is already done when the
// transaction reaches it writes nothing.
func TestGroupCommitCancelledMember(t *testing.T) {
	s := newTestStore(t, Options{})
	held, release := make(chan struct{}), make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		s.Update(context.Background(), func(tx driver.Tx) error {
			close(held)
			<-release
			_, err := tx.Append([]core.Message{core.NewMessage(ev{Account: "a", Ref: "kept"})}, driver.AppendOptions{})
			return err
		})
	})
	<-held
	ctx, cancel := context.WithCancel(context.Background())
	var cerr error
	wg.Go(func() {
		cerr = s.Update(ctx, func(tx driver.Tx) error {
			_, err := tx.Append([]core.Message{core.NewMessage(ev{Account: "a", Ref: "cancelled"})}, driver.AppendOptions{})
			return err
		})
	})
	for s.waiting.Load() < 1 {
		time.Sleep(time.Millisecond)
	}
	cancel()
	close(release)
	wg.Wait()
	if !errors.Is(cerr, context.Canceled) {
		t.Fatalf("cancelled member: %v, want context.Canceled", cerr)
	}
	res, err := s.ReadAll(context.Background(), driver.ReadAllOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Messages) != 1 || res.Messages[0].Payload.(ev).Ref != "kept" {
		t.Fatalf("log %v, want only the first member's message", res.Messages)
	}
}
