package otelobserver_test

import (
	"context"
	"fmt"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell"
	"github.com/sourced-go/sourced/shell/memstore"
	"github.com/sourced-go/sourced/shell/otelobserver"
)

// Record a router's batches as OpenTelemetry metrics (here read back from
// an in-memory reader; in production, the SDK's exporters).
func ExampleNew() {
	reader := sdkmetric.NewManualReader()
	obs, err := otelobserver.New(otelobserver.Options{MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	store := memstore.New(registry())
	router, _ := shell.NewRouter(store, shell.RouterOptions{Observer: obs}, orders, shipping)
	_ = router.Setup(ctx)
	_, _ = store.Append(ctx, core.Messages(PlaceOrder{OrderID: "o1"}), shell.AppendOptions{})
	_ = router.Drain(ctx, nil)

	var rm metricdata.ResourceMetrics
	_ = reader.Collect(ctx, &rm)
	for _, m := range rm.ScopeMetrics[0].Metrics {
		if m.Name == "sourced.messages.appended" {
			for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
				g, _ := dp.Attributes.Value("sourced.group")
				fmt.Println(g.AsString(), dp.Value)
			}
		}
	}
	// Unordered output:
	// orders 2
	// shipping 1
}
