package dashboard

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell"
	"github.com/sourced-go/sourced/shell/topology"
	"github.com/sourced-go/sourced/statechart"
)

// machineInfo is a machine of the application, as the machines pages need
// it: its topology node (chart and diagram), its partition keys and the
// stored names of its state events.
type machineInfo struct {
	Node        topology.Node
	PartitionBy []string
	StateTypes  []string
}

// StateTypesProvider is the optional interface of a definition that is a
// statechart machine: the Go types of the state events it records
// (statechart.Machine implements it). The machines page lists the
// instances of the definitions that have it.
type StateTypesProvider interface {
	StateTypes() []reflect.Type
}

// machines lists the machines among the reactors (with the children they
// start), by group.
func (d *Dashboard) machines() []machineInfo {
	var defs []core.Definition
	for _, r := range shell.Expand(d.opts.Reactors...) {
		if def, ok := r.(core.Definition); ok {
			defs = append(defs, def)
		}
	}
	var out []machineInfo
	for _, def := range defs {
		st, ok := def.(StateTypesProvider)
		if !ok {
			continue
		}
		spec := def.Spec()
		n, ok := d.graph.Node("machine:" + spec.Group)
		if !ok {
			continue
		}
		names, _ := d.opts.Registry.Names(st.StateTypes()...)
		out = append(out, machineInfo{Node: n, PartitionBy: spec.PartitionBy, StateTypes: names})
	}
	return out
}

func (d *Dashboard) machinesPage(w http.ResponseWriter, r *http.Request) {
	d.render(w, r, "machines", "machines", "Machines", struct {
		Machines []machineInfo
		Reactors bool
	}{d.machines(), len(d.opts.Reactors) > 0})
}

func (d *Dashboard) machinePage(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	group := r.PathValue("group")
	var m *machineInfo
	for _, x := range d.machines() {
		if x.Node.GroupID == group {
			m = &x
			break
		}
	}
	if m == nil {
		d.fail(w, r, http.StatusNotFound, fmt.Errorf("no machine %q among the dashboard's reactors (Options.Reactors)", group))
		return
	}
	data := struct {
		Machine   machineInfo
		Chart     template.HTML
		Partition string
		Paths     []string
		Events    []logRow
		Instances []shell.Offset
		Err       string
	}{Machine: *m}
	partition := map[string]string{}
	if p := r.URL.Query().Get("partition"); p != "" {
		data.Partition = p
		for _, kv := range strings.Split(p, "|") {
			k, v, ok := strings.Cut(kv, ":")
			if !ok || !slices.Contains(m.PartitionBy, k) {
				data.Err = fmt.Sprintf("partition %q: write key:value pairs joined by |, with the keys %v", p, m.PartitionBy)
				break
			}
			partition[k] = v
		}
		if data.Err == "" && len(partition) != len(m.PartitionBy) {
			data.Err = fmt.Sprintf("partition %q: give every key of %v", p, m.PartitionBy)
		}
		if data.Err == "" {
			res, err := d.store.ReadPartition(ctx, partition, m.StateTypes, shell.ReadOptions{})
			if err != nil {
				data.Err = err.Error()
			} else {
				data.Paths = configuration(res.Messages)
				for _, ev := range res.Messages {
					data.Events = append(data.Events, rowOf(ev))
				}
				slices.Reverse(data.Events)
				if len(res.Messages) == 0 {
					data.Err = "no state events in this partition: the instance has not started"
				}
			}
		}
	}
	chart, err := chartHTML(m.Node.Chart, data.Paths)
	if err != nil {
		d.fail(w, r, http.StatusInternalServerError, err)
		return
	}
	data.Chart = chart
	offs, err := d.store.ReadOffsets(ctx, shell.OffsetQuery{Group: group, Limit: 50})
	if err == nil {
		data.Instances = offs.Offsets
	}
	d.render(w, r, "machine", "machines", "Machine "+m.Node.Name, data)
}

// configuration replays state events' moves (Exited, then Entered) into
// the active paths, sorted.
func configuration(events []core.PositionedMessage) []string {
	active := map[string]bool{}
	for _, ev := range events {
		mv, ok := moveOf(ev.Payload)
		if !ok {
			continue
		}
		for _, p := range mv.Exited {
			delete(active, p)
		}
		for _, p := range mv.Entered {
			active[p] = true
		}
	}
	out := make([]string, 0, len(active))
	for p := range active {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// moveOf reads the Move of a state event, decoded or raw JSON.
func moveOf(payload any) (statechart.Move, bool) {
	if raw, ok := payload.(json.RawMessage); ok {
		var mv statechart.Move
		if err := json.Unmarshal(raw, &mv); err != nil || mv.Target == "" && len(mv.Entered) == 0 {
			return mv, false
		}
		return mv, true
	}
	return statechart.MoveOf(payload)
}

// ordered is a JSON object with its keys in document order.
type ordered []kv

type kv struct {
	Key   string
	Value any
}

func (o ordered) get(k string) any {
	for _, f := range o {
		if f.Key == k {
			return f.Value
		}
	}
	return nil
}

// decodeOrdered decodes JSON keeping objects' key order.
func decodeOrdered(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var value func() (any, error)
	value = func() (any, error) {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		switch t := tok.(type) {
		case json.Delim:
			switch t {
			case '{':
				var o ordered
				for dec.More() {
					k, err := dec.Token()
					if err != nil {
						return nil, err
					}
					v, err := value()
					if err != nil {
						return nil, err
					}
					o = append(o, kv{k.(string), v})
				}
				_, err := dec.Token()
				return o, err
			case '[':
				var a []any
				for dec.More() {
					v, err := value()
					if err != nil {
						return nil, err
					}
					a = append(a, v)
				}
				_, err := dec.Token()
				return a, err
			}
			return nil, errors.New("unexpected delimiter")
		}
		return tok, nil
	}
	return value()
}

// chartHTML draws a machine's XState JSON as nested boxes: a box per
// state (class "state", plus "active" when its path is in paths, and
// "final", "parallel", "region"), its transitions listed inside it.
func chartHTML(chart json.RawMessage, paths []string) (template.HTML, error) {
	if len(chart) == 0 {
		return "", nil
	}
	doc, err := decodeOrdered(chart)
	if err != nil {
		return "", fmt.Errorf("dashboard: machine chart: %w", err)
	}
	root, ok := doc.(ordered)
	if !ok {
		return "", errors.New("dashboard: machine chart is not an object")
	}
	var b strings.Builder
	b.WriteString(`<div class="chart">`)
	writeStates(&b, root, paths)
	b.WriteString(`</div>`)
	return template.HTML(b.String()), nil
}

func esc(s string) string { return template.HTMLEscapeString(s) }

func writeStates(b *strings.Builder, n ordered, paths []string) {
	states, _ := n.get("states").(ordered)
	if len(states) == 0 {
		return
	}
	dir := "states"
	if t, _ := n.get("type").(string); t == "parallel" {
		dir = "states regions"
	}
	fmt.Fprintf(b, `<div class="%s">`, dir)
	for _, f := range states {
		s, ok := f.Value.(ordered)
		if !ok {
			continue
		}
		id, _ := s.get("id").(string)
		typ, _ := s.get("type").(string)
		cls := "state " + typ
		if slices.Contains(paths, id) {
			cls += " active"
		}
		if typ == "history" {
			continue
		}
		fmt.Fprintf(b, `<div class="%s" data-path="%s"><div class="state-name">%s</div>`, esc(cls), esc(id), esc(f.Key))
		writeTransitions(b, s)
		writeStates(b, s, paths)
		b.WriteString(`</div>`)
	}
	b.WriteString(`</div>`)
}

func targets(v any) string {
	t, _ := v.(ordered)
	arr, _ := t.get("target").([]any)
	var out []string
	for _, x := range arr {
		if s, ok := x.(string); ok {
			out = append(out, strings.TrimPrefix(s, "#"))
		}
	}
	if len(out) == 0 {
		return "(stays)"
	}
	return strings.Join(out, ", ")
}

func writeTransitions(b *strings.Builder, s ordered) {
	var lines []string
	if on, ok := s.get("on").(ordered); ok {
		for _, f := range on {
			ts, _ := f.Value.([]any)
			for _, t := range ts {
				lines = append(lines, fmt.Sprintf(`<li><span class="trigger">%s</span> → %s</li>`, esc(f.Key), esc(targets(t))))
			}
		}
	}
	for _, key := range []string{"always", "onDone"} {
		if ts, ok := s.get(key).([]any); ok {
			for _, t := range ts {
				lines = append(lines, fmt.Sprintf(`<li><span class="trigger">%s</span> → %s</li>`, key, esc(targets(t))))
			}
		}
	}
	if after, ok := s.get("after").(ordered); ok {
		for _, f := range after {
			label := f.Key + " ms"
			if ms, err := strconv.ParseInt(f.Key, 10, 64); err == nil {
				label = (time.Duration(ms) * time.Millisecond).String()
			}
			lines = append(lines, fmt.Sprintf(`<li><span class="trigger">after %s</span></li>`, esc(label)))
		}
	}
	for _, key := range []string{"entry", "exit"} {
		if as, ok := s.get(key).([]any); ok && len(as) > 0 {
			lines = append(lines, fmt.Sprintf(`<li><span class="trigger">%s</span> %d action(s)</li>`, key, len(as)))
		}
	}
	if len(lines) > 0 {
		b.WriteString(`<ul class="transitions">` + strings.Join(lines, "") + `</ul>`)
	}
}
