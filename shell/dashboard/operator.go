package dashboard

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"reflect"
	"time"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell"
)

// lag is a group's pending work as a page shows it (see shell.Lagger).
type lag struct {
	Known bool
	// Pending and Parked count the group's pending and parked partitions.
	Pending, Parked int64
	// Total is the pending messages of the Counted partitions; AtLeast
	// says it is a lower bound (a pending partition was not counted, or a
	// count reached the limit).
	Total    int
	Counted  int
	AtLeast  bool
	ByOffset map[int64]int
}

// lagOf counts the pending work of group within q's bounds; unknown (and
// no query made) on a store that is not a shell.Lagger or when the count
// fails (the page shows "–" rather than failing whole).
func (d *Dashboard) lagOf(ctx context.Context, group string, q shell.LagQuery) lag {
	l, ok := d.store.(shell.Lagger)
	if !ok {
		return lag{}
	}
	got, err := l.GroupLag(ctx, group, q)
	if err != nil {
		d.log.DebugContext(ctx, "dashboard: lag not counted", "group", group, "error", err)
		return lag{}
	}
	return lag{Known: true, Pending: got.Pending, Parked: got.Parked, Total: got.Total(), Counted: len(got.ByOffset), AtLeast: got.Partial(), ByOffset: got.ByOffset}
}

// groupLag is the lag of a group as a whole: its pending partitions and
// parked ones, and the messages of the Options.LagPartitions partitions
// furthest behind.
func (d *Dashboard) groupLag(ctx context.Context, group string) lag {
	return d.lagOf(ctx, group, shell.LagQuery{Partitions: d.opts.LagPartitions})
}

// workerRow is a worker's heartbeat.
type workerRow struct {
	ID       string
	LastSeen time.Time
	// Claims is the partitions it holds claimed (-1: the store does not
	// count them).
	Claims int
}

// maxWorkers caps the workers a page lists.
const maxWorkers = 200

// workers reads the workers' heartbeats from a store with a Workers
// method (sqlitestore and pgstore each return a slice of their own Worker
// struct, with ID, LastSeen and Claims fields: read by reflection, so any
// store with that shape works); false when the store has none. One
// query: the stores count the claims through their index of claimed
// offsets.
func (d *Dashboard) workers(ctx context.Context) ([]workerRow, bool, error) {
	m := reflect.ValueOf(d.store).MethodByName("Workers")
	if !m.IsValid() || m.Type().NumIn() != 1 || m.Type().NumOut() != 2 || m.Type().Out(0).Kind() != reflect.Slice {
		return nil, false, nil
	}
	out := m.Call([]reflect.Value{reflect.ValueOf(ctx)})
	if err, _ := out[1].Interface().(error); err != nil {
		return nil, true, err
	}
	var rows []workerRow
	for i := range min(out[0].Len(), maxWorkers) {
		w := reflect.Indirect(out[0].Index(i))
		if w.Kind() != reflect.Struct {
			return nil, false, nil
		}
		id, seen := w.FieldByName("ID"), w.FieldByName("LastSeen")
		if !id.IsValid() || id.Kind() != reflect.String || !seen.IsValid() {
			return nil, false, nil
		}
		t, _ := seen.Interface().(time.Time)
		row := workerRow{ID: id.String(), LastSeen: t, Claims: -1}
		if c := w.FieldByName("Claims"); c.IsValid() && c.CanInt() {
			row.Claims = int(c.Int())
		}
		rows = append(rows, row)
	}
	return rows, true, nil
}

// parkedAction runs an operator's action on a parked partition:
// POST /parked/{retry|skip|reset} with the form's group and partition (any
// text core.ParsePartition reads: the forms post core.Partition's String).
func (d *Dashboard) parkedAction(w http.ResponseWriter, r *http.Request) {
	if d.opts.ReadOnly {
		d.fail(w, r, http.StatusForbidden, errors.New("the dashboard is read-only: operator actions are disabled"))
		return
	}
	if !sameOrigin(r) {
		d.fail(w, r, http.StatusForbidden, errors.New("cross-origin request refused"))
		return
	}
	ctx := r.Context()
	group, act := r.FormValue("group"), r.PathValue("action")
	partition, err := core.ParsePartition(r.FormValue("partition"))
	if err != nil {
		d.fail(w, r, http.StatusBadRequest, err)
		return
	}
	switch act {
	case "retry":
		_, err = d.store.RetryPartition(ctx, group, partition)
	case "skip":
		_, err = d.store.SkipFailedMessage(ctx, group, partition)
	case "reset":
		_, err = d.store.ResetPartition(ctx, group, partition)
	default:
		d.fail(w, r, http.StatusNotFound, fmt.Errorf("no action %q on a parked partition: use retry, skip or reset", act))
		return
	}
	if errors.Is(err, shell.ErrNotParked) {
		d.fail(w, r, http.StatusConflict, err)
		return
	}
	if err != nil {
		d.fail(w, r, statusOf(err), err)
		return
	}
	d.log.InfoContext(ctx, "dashboard: operator action on a parked partition", "group", group, "partition", core.Partition(partition).String(), "action", act)
	back := safeBack(r.FormValue("back"), "/partitions")
	http.Redirect(w, r, d.opts.Prefix+back+sep(back)+"flash="+url.QueryEscape(fmt.Sprintf("%s %s: %s done", group, core.Partition(partition).String(), act)), http.StatusSeeOther)
}

// parkedConfirm is the confirmation of a parked partition's action.
func parkedConfirm(p shell.ParkedPartition, act string) string {
	key := core.Partition(p.Partition).String()
	switch act {
	case "retry":
		return fmt.Sprintf("Retry %s of %s? Its failed message is handled again.", key, p.Group)
	case "skip":
		return fmt.Sprintf("Skip %s at position %d in %s of %s? The message stays in the log, unprocessed by this group.", p.Failure.MessageType, p.Failure.Position, key, p.Group)
	case "reset":
		return fmt.Sprintf("Reset %s of %s? The partition replays from the start.", key, p.Group)
	}
	return act
}

// parkedRow is a parked partition with its actions.
type parkedRow struct {
	shell.ParkedPartition
	Key     string
	Form    string // the partition as its forms post it (core.Partition's String)
	Actions []parkedButton
}

type parkedButton struct{ Name, Confirm string }

// parkedPage is the parked partitions a page lists at once.
const parkedPage = 50

// parkedList is a page of parked partitions.
type parkedList struct {
	Rows []parkedRow
	// Total counts the parked partitions (-1: not counted).
	Total int64
	// More is the path of the next page ("" when this is the last).
	More string
}

// parked reads a page of group's parked partitions ("" for every
// group's) from offset id from, on a store that pages them
// (shell.ParkedReader); all of them on another. next builds the path of
// the page from an offset id.
func (d *Dashboard) parked(ctx context.Context, group string, from int64, next func(from int64) string) (parkedList, error) {
	list := parkedList{Total: -1}
	var ps []shell.ParkedPartition
	var err error
	if pr, ok := d.store.(shell.ParkedReader); ok {
		ps, err = pr.ReadParked(ctx, shell.ParkedQuery{Group: group, From: from, Limit: parkedPage + 1})
		if len(ps) > parkedPage {
			list.More = next(ps[parkedPage].OffsetID)
			ps = ps[:parkedPage]
		}
	} else {
		ps, err = d.store.ParkedPartitions(ctx, group)
		list.Total = int64(len(ps))
	}
	if err != nil {
		return list, err
	}
	list.Rows = make([]parkedRow, 0, len(ps))
	for _, p := range ps {
		row := parkedRow{ParkedPartition: p, Key: core.Partition(p.Partition).String(), Form: core.Partition(p.Partition).String()}
		for _, a := range []string{"retry", "skip", "reset"} {
			row.Actions = append(row.Actions, parkedButton{a, parkedConfirm(p, a)})
		}
		list.Rows = append(list.Rows, row)
	}
	if list.Total < 0 && from == 0 && list.More == "" {
		list.Total = int64(len(ps))
	}
	return list, nil
}
