package dashboard

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"reflect"
	"time"

	"github.com/sourced-go/sourced/shell"
)

// lagLimit caps the pending messages counted per partition: a count at
// the cap reads "at least".
const lagLimit = 1000

// lagger is implemented by the stores that count a group's pending
// messages per partition (sqlitestore, pgstore).
type lagger interface {
	Lag(ctx context.Context, group string, limit int) (map[int64]int, error)
}

// lag is a group's pending work: per offset id, and in total.
type lag struct {
	Known     bool
	Total     int
	AtLeast   bool // some partition's count reached lagLimit
	ByOffset  map[int64]int
	Pending   int // partitions with pending work
	errorText string
}

func (d *Dashboard) lagOf(ctx context.Context, group string) lag {
	l, ok := d.store.(lagger)
	if !ok {
		return lag{}
	}
	by, err := l.Lag(ctx, group, lagLimit)
	if err != nil {
		return lag{errorText: err.Error()}
	}
	out := lag{Known: true, ByOffset: by, Pending: len(by)}
	for _, n := range by {
		out.Total += n
		if n >= lagLimit {
			out.AtLeast = true
		}
	}
	return out
}

// workerRow is a worker's heartbeat.
type workerRow struct {
	ID       string
	LastSeen time.Time
	Claims   int
}

// workers reads the workers' heartbeats from a store with a Workers
// method (sqlitestore and pgstore each return a slice of their own Worker
// struct, with ID and LastSeen fields: read by reflection, so any store
// with that shape works); false when the store has none.
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
	for i := range out[0].Len() {
		w := reflect.Indirect(out[0].Index(i))
		if w.Kind() != reflect.Struct {
			return nil, false, nil
		}
		id, seen := w.FieldByName("ID"), w.FieldByName("LastSeen")
		if !id.IsValid() || id.Kind() != reflect.String || !seen.IsValid() {
			return nil, false, nil
		}
		t, _ := seen.Interface().(time.Time)
		rows = append(rows, workerRow{ID: id.String(), LastSeen: t})
	}
	return rows, true, nil
}

// parkedAction runs an operator's action on a parked partition:
// POST /parked/{retry|skip|reset} with the form's group and partition (as
// shell.PartitionJSON renders it, or as shell.PartitionKey does: see
// shell.ParsePartition).
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
	partition, err := shell.ParsePartition(r.FormValue("partition"))
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
	d.log.InfoContext(ctx, "dashboard: operator action on a parked partition", "group", group, "partition", shell.PartitionKey(partition), "action", act)
	back := safeBack(r.FormValue("back"), "/partitions")
	http.Redirect(w, r, d.opts.Prefix+back+sep(back)+"flash="+url.QueryEscape(fmt.Sprintf("%s %s: %s done", group, shell.PartitionKey(partition), act)), http.StatusSeeOther)
}

// parkedConfirm is the confirmation of a parked partition's action.
func parkedConfirm(p shell.ParkedPartition, act string) string {
	key := shell.PartitionKey(p.Partition)
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
	Form    string // the partition as its forms post it (shell.PartitionJSON)
	Actions []parkedButton
}

type parkedButton struct{ Name, Confirm string }

func (d *Dashboard) parked(ctx context.Context, group string) ([]parkedRow, error) {
	ps, err := d.store.ParkedPartitions(ctx, group)
	if err != nil {
		return nil, err
	}
	rows := make([]parkedRow, 0, len(ps))
	for _, p := range ps {
		row := parkedRow{ParkedPartition: p, Key: shell.PartitionKey(p.Partition), Form: shell.PartitionJSON(p.Partition)}
		for _, a := range []string{"retry", "skip", "reset"} {
			row.Actions = append(row.Actions, parkedButton{a, parkedConfirm(p, a)})
		}
		rows = append(rows, row)
	}
	return rows, nil
}
