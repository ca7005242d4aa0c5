package dashboard

import (
	"cmp"
	"fmt"
	"html/template"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sourced-go/sourced/core"
)

// window is a span the charts show: the last minutes (the fine ring) or
// hours (the coarse ring).
type window struct {
	Name   string
	Fine   bool
	Slots  int
	Length time.Duration
}

var windows = []window{
	{"10m", true, fineSlots, fineSlots * fineStep},
	{"1h", false, 48, 48 * coarseStep},
	{"3h", false, coarseSlots, coarseSlots * coarseStep},
}

// windowOf is the window a page asks for (?window=), the first by default.
func windowOf(name string) window {
	for _, w := range windows {
		if w.Name == name {
			return w
		}
	}
	return windows[0]
}

// chartSeries is one line of a chart: a value per slot, NaN where there is
// none.
type chartSeries struct {
	Name   string
	Class  string
	Values []float64
}

// timeChart is a chart of one quantity over a window.
type timeChart struct {
	ID     string
	Title  string
	Unit   string
	Help   string
	Window window
	Series []chartSeries
}

// Chart size, in SVG user units (the viewBox): the chart scales to its
// box's width, keeping its proportions.
const (
	chartW, chartH          = 320, 120
	plotL, plotR            = 40, 6
	plotT, plotB            = 8, 18
	plotWidth, plotHeight   = chartW - plotL - plotR, chartH - plotT - plotB
	chartMaxPointsPerSeries = coarseSlots
)

// Points counts the values the chart has (not missing).
func (c timeChart) Points() int {
	n := 0
	for _, s := range c.Series {
		for _, v := range s.Values {
			if !math.IsNaN(v) {
				n++
			}
		}
	}
	return n
}

// Max is the largest value of the chart (0 when it has none).
func (c timeChart) Max() float64 {
	m := 0.0
	for _, s := range c.Series {
		for _, v := range s.Values {
			if !math.IsNaN(v) && v > m {
				m = v
			}
		}
	}
	return m
}

// Latest are the series' last values, for the legend.
func (c timeChart) Latest() []string {
	out := make([]string, len(c.Series))
	for i, s := range c.Series {
		out[i] = "–"
		for j := len(s.Values) - 1; j >= 0; j-- {
			if !math.IsNaN(s.Values[j]) {
				out[i] = formatValue(s.Values[j])
				break
			}
		}
	}
	return out
}

// niceMax rounds m up to 1, 2 or 5 times a power of ten (1 for 0).
func niceMax(m float64) float64 {
	if m <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(m)))
	for _, f := range []float64{1, 2, 5, 10} {
		if f*p >= m {
			return f * p
		}
	}
	return 10 * p
}

func formatValue(v float64) string {
	switch {
	case v == math.Trunc(v) && math.Abs(v) < 1e6:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case math.Abs(v) >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case math.Abs(v) >= 1:
		return strconv.FormatFloat(v, 'f', 1, 64)
	}
	return strconv.FormatFloat(v, 'f', 2, 64)
}

func formatSpan(d time.Duration) string {
	if d >= time.Hour && d%time.Hour == 0 {
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	if d >= time.Hour {
		return fmt.Sprintf("%.1fh", d.Hours())
	}
	return fmt.Sprintf("%dm", int(d.Minutes()))
}

// SVG draws the chart: a fixed viewBox, its series as polylines (broken
// where values are missing), the scale's top and the window's span. It
// uses presentation attributes and classes only (no inline style), so
// that the pages' Content-Security-Policy stays strict.
func (c timeChart) SVG() template.HTML {
	var b strings.Builder
	esc := template.HTMLEscapeString
	top := niceMax(c.Max())
	fmt.Fprintf(&b, `<svg class="timeline-svg" viewBox="0 0 %d %d" width="%d" height="%d" role="img" aria-label="%s" data-points="%d" data-max="%s" preserveAspectRatio="xMidYMid meet">`,
		chartW, chartH, chartW, chartH, esc(c.Title), c.Points(), formatValue(c.Max()))
	fmt.Fprintf(&b, `<title>%s</title>`, esc(c.Title+" ("+c.Unit+"), the last "+formatSpan(c.Window.Length)))
	// Axes and scale.
	fmt.Fprintf(&b, `<line class="axis" x1="%d" y1="%d" x2="%d" y2="%d"/>`, plotL, plotT+plotHeight, plotL+plotWidth, plotT+plotHeight)
	fmt.Fprintf(&b, `<line class="grid" x1="%d" y1="%d" x2="%d" y2="%d"/>`, plotL, plotT, plotL+plotWidth, plotT)
	fmt.Fprintf(&b, `<text class="tick" x="%d" y="%d" text-anchor="end">%s</text>`, plotL-4, plotT+4, formatValue(top))
	fmt.Fprintf(&b, `<text class="tick" x="%d" y="%d" text-anchor="end">0</text>`, plotL-4, plotT+plotHeight+4)
	fmt.Fprintf(&b, `<text class="tick" x="%d" y="%d" text-anchor="start">−%s</text>`, plotL, chartH-4, formatSpan(c.Window.Length))
	fmt.Fprintf(&b, `<text class="tick" x="%d" y="%d" text-anchor="end">now</text>`, plotL+plotWidth, chartH-4)
	if c.Points() == 0 {
		fmt.Fprintf(&b, `<text class="nodata" x="%d" y="%d" text-anchor="middle">no data yet</text>`, plotL+plotWidth/2, plotT+plotHeight/2+4)
	}
	for _, s := range c.Series {
		n := len(s.Values)
		if n > chartMaxPointsPerSeries {
			s.Values, n = s.Values[n-chartMaxPointsPerSeries:], chartMaxPointsPerSeries
		}
		x := func(i int) float64 {
			if n <= 1 {
				return plotL + plotWidth
			}
			return plotL + float64(i)*plotWidth/float64(n-1)
		}
		y := func(v float64) float64 { return plotT + plotHeight - math.Min(v, top)/top*plotHeight }
		fmt.Fprintf(&b, `<g class="series %s" data-series="%s">`, esc(s.Class), esc(s.Name))
		var run []string
		flush := func() {
			switch len(run) {
			case 0:
			case 1:
				xy := strings.Split(run[0], ",")
				fmt.Fprintf(&b, `<circle cx="%s" cy="%s" r="2"/>`, xy[0], xy[1])
			default:
				fmt.Fprintf(&b, `<polyline points="%s"/>`, strings.Join(run, " "))
			}
			run = run[:0]
		}
		for i, v := range s.Values {
			if math.IsNaN(v) {
				flush()
				continue
			}
			run = append(run, strconv.FormatFloat(x(i), 'f', 1, 64)+","+strconv.FormatFloat(y(v), 'f', 1, 64))
		}
		flush()
		b.WriteString(`</g>`)
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

// hotRow is a partition's claims and conflicts over a window.
type hotRow struct {
	Group, Key        string
	Claims, Conflicts int64
	// State is the partition's time-travel page, when its group's reactor
	// keeps a state and the key was kept whole.
	State string
}

// withStates links the hot partitions to their state pages.
func (d *Dashboard) withStates(t timelines) timelines {
	foldable := map[string]bool{}
	for i, h := range t.Hot {
		ok, seen := foldable[h.Group]
		if !seen {
			_, err := foldableOf(d.opts.Registry, d.opts.Reactors, h.Group)
			ok = err == nil
			foldable[h.Group] = ok
		}
		if !ok || (len(h.Key) >= maxHotKey-3 && strings.HasSuffix(h.Key, "...")) {
			continue
		}
		if p, err := core.ParsePartition(h.Key); err == nil {
			t.Hot[i].State = stateURL(h.Group, p, Latest)
		}
	}
	return t
}

// timelines are a page's charts and hottest partitions.
type timelines struct {
	Window   window
	Windows  []window
	Charts   []timeChart
	Hot      []hotRow
	Recorder bool // a recorder is set: the observed series exist
	Dropped  int64
	Group    string // "" for every group
	Base     string // the page's path, for the window links
}

// step is the length of the window's slots.
func (w window) step() time.Duration {
	if w.Fine {
		return fineStep
	}
	return coarseStep
}

// timelines builds the charts of group ("" for all the recorder's groups)
// over w, from the recorder's rings; observed tells whether the recorder
// hears a runtime (else only the store's samples are drawn).
func (r *Recorder) timelines(group string, w window, base string, observed bool) timelines {
	t := timelines{Window: w, Windows: windows, Recorder: observed, Group: group, Base: base}
	n := w.Slots
	nan := func() []float64 {
		v := make([]float64, n)
		for i := range v {
			v[i] = math.NaN()
		}
		return v
	}
	handled, claims, conflicts, failures, retries, lagV, appended := nan(), nan(), nan(), nan(), nan(), nan(), nan()
	step := w.step()
	if r != nil {
		r.mu.Lock()
		t.Dropped = r.dropped
		now := r.now()
		last := now.UnixNano()/int64(step) + 1
		first := last - int64(n) + 1
		startIdx := r.started.UnixNano()/int64(step) + 1
		pick := func(g *groupSeries) *ring {
			if w.Fine {
				return &g.fine
			}
			return &g.coarse
		}
		var series []*groupSeries
		if group == "" {
			for _, id := range r.order {
				series = append(series, r.groups[id])
			}
		} else if g, ok := r.groups[group]; ok {
			series = append(series, g)
		}
		hot := map[[2]string]*hotRow{}
		for i := range n {
			idx := first + int64(i)
			// Rates are per second of the slot; the current slot's, of
			// its part gone by (at least a second), so that the line
			// does not dip at "now".
			secs := step.Seconds()
			if idx == last {
				secs = max(1, now.Sub(time.Unix(0, (idx-1)*int64(step))).Seconds())
			}
			if observed && idx >= startIdx {
				handled[i], claims[i], conflicts[i], failures[i], retries[i] = 0, 0, 0, 0, 0
			}
			lagSum, lagged := 0.0, false
			for gi, g := range series {
				s := pick(g).get(idx)
				if s == nil {
					continue
				}
				if s.LagKnown {
					lagSum, lagged = lagSum+float64(s.Lag), true
				}
				if !observed {
					continue
				}
				handled[i] += float64(s.Handled) / secs
				claims[i] += float64(s.Claims) / secs
				conflicts[i] += float64(s.Conflicts) / secs
				failures[i] += float64(s.Failures)
				retries[i] += float64(s.Retries)
				id := group
				if id == "" {
					id = r.order[gi]
				}
				for _, h := range s.Hot {
					k := [2]string{id, h.Key}
					if hot[k] == nil {
						hot[k] = &hotRow{Group: id, Key: h.Key}
					}
					hot[k].Claims += h.Claims - h.OverClaims
					hot[k].Conflicts += h.Conflicts - h.OverConflicts
				}
			}
			if lagged {
				lagV[i] = lagSum
			}
		}
		// The log's appended messages per second, from the positions
		// sampled: between consecutive samples.
		secs := step.Seconds()
		lg := pick(r.log)
		prev, prevIdx := int64(-1), int64(0)
		for i := range n {
			idx := first + int64(i)
			s := lg.get(idx)
			if s == nil || !s.Sampled {
				continue
			}
			if prev >= 0 && s.Position >= prev {
				appended[i] = float64(s.Position-prev) / (float64(idx-prevIdx) * secs)
			}
			prev, prevIdx = s.Position, idx
		}
		r.mu.Unlock()
		for _, h := range hot {
			if h.Claims > 0 || h.Conflicts > 0 {
				t.Hot = append(t.Hot, *h)
			}
		}
		slices.SortFunc(t.Hot, func(a, b hotRow) int {
			return cmp.Or(cmp.Compare(b.Conflicts*10+b.Claims, a.Conflicts*10+a.Claims), cmp.Compare(b.Conflicts, a.Conflicts), cmp.Compare(a.Group, b.Group), cmp.Compare(a.Key, b.Key))
		})
		if len(t.Hot) > 10 {
			t.Hot = t.Hot[:10]
		}
	}
	per := "per " + formatStep(step)
	t.Charts = []timeChart{
		{ID: "lag", Title: "Lag", Unit: "pending messages", Help: "sampled from the store when this page renders", Window: w,
			Series: []chartSeries{{Name: "lag", Class: "s-lag", Values: lagV}}},
		{ID: "throughput", Title: "Throughput", Unit: "messages per second", Help: "handled: by this process's runtime; appended: the log's, from its positions", Window: w,
			Series: []chartSeries{{Name: "handled", Class: "s-handled", Values: handled}, {Name: "appended", Class: "s-appended", Values: appended}}},
		{ID: "contention", Title: "Claims and guard conflicts", Unit: "per second", Help: "by this process's runtime", Window: w,
			Series: []chartSeries{{Name: "claims", Class: "s-claims", Values: claims}, {Name: "conflicts", Class: "s-conflicts", Values: conflicts}}},
		{ID: "failures", Title: "Failures and retries", Unit: per, Help: "by this process's runtime", Window: w,
			Series: []chartSeries{{Name: "failures", Class: "s-failures", Values: failures}, {Name: "retries", Class: "s-retries", Values: retries}}},
	}
	return t
}

func formatStep(d time.Duration) string { return fmt.Sprintf("%d s", int(d.Seconds())) }
