package otelobserver_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell"
	"github.com/sourced-go/sourced/shell/memstore"
	"github.com/sourced-go/sourced/shell/otelobserver"
	"github.com/sourced-go/sourced/shell/sqlitestore"
)

type (
	PlaceOrder struct {
		OrderID string `json:"order_id" sourced:"required"`
	}
	OrderPlaced struct {
		OrderID string `json:"order_id" sourced:"required"`
	}
	ShipOrder struct {
		OrderID string `json:"order_id" sourced:"required"`
	}
	OrderShipped struct {
		OrderID string `json:"order_id"`
	}
)

func registry() *codec.Registry {
	reg := codec.NewRegistry()
	codec.MustRegister[PlaceOrder](reg, "orders.place")
	codec.MustRegister[OrderPlaced](reg, "orders.placed")
	codec.MustRegister[ShipOrder](reg, "orders.ship")
	codec.MustRegister[OrderShipped](reg, "orders.shipped")
	return reg
}

var orders = core.Decider[bool]{Group: "orders", PartitionBy: []string{"order_id"}}.With(
	core.Evolve(func(bool, OrderPlaced) bool { return true }),
	core.Decide(func(_ bool, c PlaceOrder) ([]any, error) { return []any{OrderPlaced(c)}, nil }),
	core.React(func(_ bool, e OrderPlaced) []any { return []any{ShipOrder(e)} }),
)

// shipping's refusal ("no courier") is a failure of its group here
// (RefusalsFail), for the failure metrics and spans to count.
var shipping = core.Decider[int]{Group: "shipping", PartitionBy: []string{"order_id"}, Hooks: core.Hooks{RefusalsFail: true}}.With(
	core.Decide(func(_ int, c ShipOrder) ([]any, error) {
		if c.OrderID == "broken" {
			return nil, errors.New("no courier")
		}
		return []any{OrderShipped(c)}, nil
	}),
)

type fixture struct {
	reader *sdkmetric.ManualReader
	spans  *tracetest.SpanRecorder
	store  shell.Store
	router *shell.Router
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	reader := sdkmetric.NewManualReader()
	spans := tracetest.NewSpanRecorder()
	obs, err := otelobserver.New(otelobserver.Options{
		MeterProvider:  sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)),
		TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans)),
	})
	if err != nil {
		t.Fatal(err)
	}
	store := memstore.New(registry())
	router, err := shell.NewRouter(store, shell.RouterOptions{Observer: obs, ErrorStrategy: shell.ErrorStrategy{Retries: 2, After: time.Minute}}, orders, shipping)
	if err != nil {
		t.Fatal(err)
	}
	if err := router.Setup(context.Background()); err != nil {
		t.Fatal(err)
	}
	return &fixture{reader: reader, spans: spans, store: store, router: router}
}

// sums returns the counters' values by metric name and group.
func (f *fixture) sums(t *testing.T) map[string]map[string]int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := f.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != otelobserver.Scope {
			t.Errorf("scope %q", sm.Scope.Name)
		}
		for _, m := range sm.Metrics {
			byGroup := map[string]int64{}
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, dp := range d.DataPoints {
					g, _ := dp.Attributes.Value("sourced.group")
					byGroup[g.AsString()] += dp.Value
				}
			case metricdata.Histogram[float64]:
				for _, dp := range d.DataPoints {
					g, _ := dp.Attributes.Value("sourced.group")
					byGroup[g.AsString()] += int64(dp.Count)
				}
			case metricdata.Histogram[int64]:
				for _, dp := range d.DataPoints {
					g, _ := dp.Attributes.Value("sourced.group")
					byGroup[g.AsString()] += dp.Sum
				}
			}
			out[m.Name] = byGroup
		}
	}
	return out
}

func TestMetricsCountBatchesAppendsAndFailures(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	for _, id := range []string{"o1", "o2", "broken"} {
		if _, err := f.store.Append(ctx, core.Messages(PlaceOrder{OrderID: id}), shell.AppendOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	_ = f.router.Drain(ctx, &shell.DrainOptions{TolerateFailures: true})
	sums := f.sums(t)
	// orders: 3 commands + 3 reactions to OrderPlaced, in batches of one
	// partition each; shipping: o1 and o2 (broken failed).
	if got := sums["sourced.batch.size"]["orders"]; got != 6 {
		t.Errorf("orders handled %d messages, want 6", got)
	}
	if got := sums["sourced.messages.appended"]["orders"]; got != 6 {
		t.Errorf("orders appended %d messages, want 3 events and 3 ship commands", got)
	}
	if got := sums["sourced.messages.appended"]["shipping"]; got != 2 {
		t.Errorf("shipping appended %d, want 2", got)
	}
	if got := sums["sourced.failures"]["shipping"]; got != 1 {
		t.Errorf("%d shipping failures recorded, want 1", got)
	}
	if sums["sourced.batches"]["orders"] == 0 || sums["sourced.batch.duration"]["orders"] != sums["sourced.batches"]["orders"] {
		t.Errorf("batches %d, durations %d", sums["sourced.batches"]["orders"], sums["sourced.batch.duration"]["orders"])
	}
	if sums["sourced.claims"]["orders"] == 0 {
		t.Error("no claims recorded")
	}
}

func TestSpansOfOneCausalChainShareATrace(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	res, err := f.store.Append(ctx, core.Messages(PlaceOrder{OrderID: "o1"}), shell.AppendOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.router.Drain(ctx, nil); err != nil {
		t.Fatal(err)
	}
	corr := res.Messages[0].CorrelationID
	if corr == uuid.Nil {
		t.Fatal("the command has no correlation id")
	}
	ended := f.spans.Ended()
	// PlaceOrder (orders), OrderPlaced's reaction (orders), ShipOrder (shipping).
	if len(ended) != 3 {
		t.Fatalf("%d spans, want 3", len(ended))
	}
	groups := map[string]int{}
	for _, s := range ended {
		if got := uuid.UUID(s.SpanContext().TraceID()); got != corr {
			t.Errorf("span %s in trace %v, want the command's correlation %v", s.Name(), got, corr)
		}
		if !s.EndTime().After(s.StartTime()) {
			t.Errorf("span %s has no duration", s.Name())
		}
		for _, kv := range s.Attributes() {
			if kv.Key == "sourced.group" {
				groups[kv.Value.AsString()]++
			}
		}
	}
	if groups["orders"] != 2 || groups["shipping"] != 1 {
		t.Errorf("spans by group %v", groups)
	}
}

func TestConflictsCarryThePartition(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	obs, err := otelobserver.New(otelobserver.Options{MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	obs.Observe(ctx, shell.GuardConflict{Group: "orders", Partition: map[string]string{"order_id": "o1"}, Attempt: 1, Retried: true})
	obs.Observe(ctx, shell.GuardConflict{Group: "orders", Partition: map[string]string{"order_id": "o1"}, Attempt: 2, Retried: true})
	obs.Observe(ctx, shell.GuardConflict{Group: "orders", Partition: map[string]string{"order_id": "o2"}, Attempt: 1, Retried: true})
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	byPartition := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != "sourced.guard.conflicts" {
				continue
			}
			for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
				p, _ := dp.Attributes.Value("sourced.partition")
				byPartition[p.AsString()] += dp.Value
			}
		}
	}
	if byPartition["order_id:o1"] != 2 || byPartition["order_id:o2"] != 1 {
		t.Errorf("conflicts by partition %v", byPartition)
	}
}

func TestLagGaugeReadsTheStore(t *testing.T) {
	ctx := context.Background()
	reader := sdkmetric.NewManualReader()
	obs, err := otelobserver.New(otelobserver.Options{MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))})
	if err != nil {
		t.Fatal(err)
	}
	store, err := sqlitestore.Install(ctx, filepath.Join(t.TempDir(), "lag.db"), sqlitestore.Options{Registry: registry()})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	router, err := shell.NewRouter(store, shell.RouterOptions{}, orders, shipping)
	if err != nil {
		t.Fatal(err)
	}
	if err := router.Setup(ctx); err != nil {
		t.Fatal(err)
	}
	reg, err := obs.RegisterLag(store, 100)
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Unregister()
	for _, id := range []string{"o1", "o2", "o2b"} {
		if _, err := store.Append(ctx, core.Messages(PlaceOrder{OrderID: id}), shell.AppendOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	gauge := func() map[string]int64 {
		var rm metricdata.ResourceMetrics
		if err := reader.Collect(ctx, &rm); err != nil {
			t.Fatal(err)
		}
		out := map[string]int64{}
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				if m.Name != "sourced.lag" {
					continue
				}
				for _, dp := range m.Data.(metricdata.Gauge[int64]).DataPoints {
					g, _ := dp.Attributes.Value("sourced.group")
					out[g.AsString()] = dp.Value
				}
			}
		}
		return out
	}
	if got := gauge(); got["orders"] != 3 || got["shipping"] != 0 {
		t.Errorf("lag before draining %v, want orders 3", got)
	}
	if err := router.Drain(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if got := gauge(); got["orders"] != 0 || got["shipping"] != 0 {
		t.Errorf("lag after draining %v, want 0", got)
	}
}
