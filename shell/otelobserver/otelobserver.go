package otelobserver

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell"
)

// Scope is the instrumentation scope name of the meter and the tracer.
const Scope = "github.com/sourced-go/sourced/shell/otelobserver"

// Options configure the observer.
type Options struct {
	// MeterProvider and TracerProvider default to the global ones
	// (otel.GetMeterProvider, otel.GetTracerProvider).
	MeterProvider  metric.MeterProvider
	TracerProvider trace.TracerProvider
	// ConflictPartitions puts the partition on sourced.guard.conflicts
	// (default true; a nil pointer means true).
	ConflictPartitions *bool
}

// Observer records observations as metrics and spans. It is safe for
// concurrent use.
type Observer struct {
	meter              metric.Meter
	tracer             trace.Tracer
	conflictPartitions bool

	batches, appended, claims, conflicts, failures, promoted metric.Int64Counter
	batchDuration, appendDuration                            metric.Float64Histogram
	batchSize                                                metric.Int64Histogram
}

var _ shell.Observer = (*Observer)(nil)

// New returns an observer with its instruments created.
func New(opts Options) (*Observer, error) {
	mp, tp := opts.MeterProvider, opts.TracerProvider
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	m := mp.Meter(Scope)
	o := &Observer{meter: m, tracer: tp.Tracer(Scope), conflictPartitions: opts.ConflictPartitions == nil || *opts.ConflictPartitions}
	var err error
	counter := func(name, unit, desc string) metric.Int64Counter {
		if err != nil {
			return nil
		}
		var c metric.Int64Counter
		c, err = m.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		return c
	}
	o.batches = counter("sourced.batches", "{batch}", "Batches handled and committed")
	o.appended = counter("sourced.messages.appended", "{message}", "Messages appended by batches and synchronous handling")
	o.claims = counter("sourced.claims", "{claim}", "Partitions claimed")
	o.conflicts = counter("sourced.guard.conflicts", "{conflict}", "Appends refused by their consistency guard")
	o.failures = counter("sourced.failures", "{batch}", "Batches that went to the error strategy")
	o.promoted = counter("sourced.scheduled.promoted", "{message}", "Scheduled messages promoted into the log")
	if err != nil {
		return nil, err
	}
	if o.batchDuration, err = m.Float64Histogram("sourced.batch.duration", metric.WithUnit("s"), metric.WithDescription("Time to handle and commit a batch")); err != nil {
		return nil, err
	}
	if o.appendDuration, err = m.Float64Histogram("sourced.append.duration", metric.WithUnit("s"), metric.WithDescription("Time of a synchronous Handle's transaction")); err != nil {
		return nil, err
	}
	if o.batchSize, err = m.Int64Histogram("sourced.batch.size", metric.WithUnit("{message}"), metric.WithDescription("Messages claimed per batch")); err != nil {
		return nil, err
	}
	return o, nil
}

func group(g string) attribute.KeyValue { return attribute.String("sourced.group", g) }

// Observe records one observation.
func (o *Observer) Observe(ctx context.Context, ob shell.Observation) {
	switch v := ob.(type) {
	case shell.BatchHandled:
		attrs := metric.WithAttributes(group(v.Group), attribute.Bool("sourced.inline", v.Inline))
		o.batches.Add(ctx, 1, attrs)
		o.batchDuration.Record(ctx, v.Duration.Seconds(), metric.WithAttributes(group(v.Group)))
		o.batchSize.Record(ctx, int64(v.Messages), metric.WithAttributes(group(v.Group)))
		if v.Appended > 0 {
			o.appended.Add(ctx, int64(v.Appended), metric.WithAttributes(group(v.Group)))
		}
		o.span(ctx, v)
	case shell.Appended:
		o.appended.Add(ctx, int64(v.Messages), metric.WithAttributes(group(v.Group)))
		o.appendDuration.Record(ctx, v.Duration.Seconds(), metric.WithAttributes(group(v.Group)))
	case shell.Claimed:
		o.claims.Add(ctx, 1, metric.WithAttributes(group(v.Group)))
	case shell.GuardConflict:
		kv := []attribute.KeyValue{group(v.Group), attribute.Bool("sourced.retried", v.Retried)}
		if o.conflictPartitions {
			kv = append(kv, attribute.String("sourced.partition", core.Partition(v.Partition).String()))
		}
		o.conflicts.Add(ctx, 1, metric.WithAttributes(kv...))
	case shell.BatchFailed:
		outcome := "failed"
		switch {
		case v.Retrying:
			outcome = "retrying"
		case v.Parked:
			outcome = "parked"
		}
		o.failures.Add(ctx, 1, metric.WithAttributes(group(v.Group), attribute.String("sourced.outcome", outcome)))
	case shell.ScheduledPromoted:
		o.promoted.Add(ctx, int64(v.Count))
	}
}

// chain is the span context standing for a causal chain: its trace id is
// the correlation id.
func chain(id uuid.UUID) trace.SpanContext {
	var tid trace.TraceID
	var sid trace.SpanID
	copy(tid[:], id[:])
	copy(sid[:], id[8:])
	if !sid.IsValid() {
		sid[7] = 1
	}
	return trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, Remote: true})
}

func (o *Observer) span(ctx context.Context, b shell.BatchHandled) {
	opts := []trace.SpanStartOption{
		trace.WithTimestamp(b.Started),
		trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(
			group(b.Group),
			attribute.String("sourced.partition", core.Partition(b.Partition).String()),
			attribute.String("sourced.worker", b.WorkerID),
			attribute.Int("sourced.messages", b.Messages),
			attribute.Int("sourced.appended", b.Appended),
			attribute.Int64("sourced.position.first", b.First),
			attribute.Int64("sourced.position.last", b.Last),
			attribute.Bool("sourced.inline", b.Inline),
		),
	}
	parent := ctx
	if len(b.Correlations) > 0 {
		parent = trace.ContextWithRemoteSpanContext(ctx, chain(b.Correlations[0]))
		var links []trace.Link
		for _, c := range b.Correlations[1:] {
			links = append(links, trace.Link{SpanContext: chain(c), Attributes: []attribute.KeyValue{attribute.String("sourced.correlation_id", c.String())}})
		}
		opts = append(opts, trace.WithLinks(links...))
		opts = append(opts, trace.WithAttributes(attribute.String("sourced.correlation_id", b.Correlations[0].String())))
	}
	_, span := o.tracer.Start(parent, "sourced.batch "+b.Group, opts...)
	span.SetStatus(codes.Ok, "")
	span.End(trace.WithTimestamp(b.Started.Add(max(b.Duration, time.Nanosecond))))
}

// Lagger is a store that counts a group's pending messages per partition
// (sqlitestore and pgstore do).
type Lagger interface {
	shell.Store
	Lag(ctx context.Context, group string, limit int) (map[int64]int, error)
}

// RegisterLag adds the gauge sourced.lag: for every consumer group of
// store, how many messages of its handled types its partitions have not
// processed yet (counting at most limit per partition, 0: no cap), read
// from the store at each collection, with sourced.group and, as
// sourced.partitions, how many partitions have pending work (a second
// gauge, sourced.lag.partitions). Unregister it with the returned
// registration's Unregister.
func (o *Observer) RegisterLag(store Lagger, limit int) (metric.Registration, error) {
	lag, err := o.meter.Int64ObservableGauge("sourced.lag", metric.WithUnit("{message}"), metric.WithDescription("Messages of a group's handled types its partitions have not processed yet"))
	if err != nil {
		return nil, err
	}
	parts, err := o.meter.Int64ObservableGauge("sourced.lag.partitions", metric.WithUnit("{partition}"), metric.WithDescription("Partitions of a group with pending work"))
	if err != nil {
		return nil, err
	}
	return o.meter.RegisterCallback(func(ctx context.Context, obs metric.Observer) error {
		st, err := store.Stats(ctx)
		if err != nil {
			return err
		}
		var errs []error
		for _, g := range st.Groups {
			by, err := store.Lag(ctx, g.ID, limit)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			total := 0
			for _, n := range by {
				total += n
			}
			attrs := metric.WithAttributes(group(g.ID))
			obs.ObserveInt64(lag, int64(total), attrs)
			obs.ObserveInt64(parts, int64(len(by)), attrs)
		}
		return errors.Join(errs...)
	}, lag, parts)
}
