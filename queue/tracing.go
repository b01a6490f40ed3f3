package queue

import (
	"context"
	"strconv"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// Tracing (docs/tracing.md). The queue makes OpenTelemetry spans through
// Options.TracerProvider, which is the global provider when nil: a no-op
// unless the application installs one. A timer scheduled inside a sampled
// span keeps that span's W3C traceparent in Redis until it fires; the
// claim moves it into the timer's fire stream entry, so that the fire span
// (in the worker) and the consume span (in the handler's process) join the
// trace that scheduled the timer. A timer scheduled outside a sampled trace
// stores nothing more.

// tracerName is the instrumentation scope of timerq's spans.
const tracerName = "github.com/timerq/timerq"

// The spans timerq makes.
const (
	spanSchedule = "timerq.schedule" // one per Schedule/ScheduleIn/ScheduleBatch call
	spanClaim    = "timerq.claim"    // one per claim of a shard that fired timers or failed
	spanFire     = "timerq.fire"     // one per fired traced timer: child of the schedule span
	spanConsume  = "timerq.consume"  // one per delivery to a Consume handler
)

// Span attributes.
const (
	attrNamespace = attribute.Key("timerq.namespace")
	attrShard     = attribute.Key("timerq.shard")
	attrTimerID   = attribute.Key("timerq.timer.id")
	attrDue       = attribute.Key("timerq.timer.due_ms")
	attrLateness  = attribute.Key("timerq.timer.lateness_ms")
	attrBatch     = attribute.Key("timerq.batch.size")
	attrCreated   = attribute.Key("timerq.batch.created")
	attrLimit     = attribute.Key("timerq.claim.limit")
	attrFired     = attribute.Key("timerq.claim.fired")
	attrMaxLate   = attribute.Key("timerq.claim.max_lateness_ms")
	attrGroup     = attribute.Key("timerq.consume.group")
	attrConsumer  = attribute.Key("timerq.consume.consumer")
	attrAttempt   = attribute.Key("timerq.consume.attempt")
	attrStreamID  = attribute.Key("timerq.stream.id")
	attrSystem    = attribute.Key("messaging.system")
)

var systemTimerq = attrSystem.String("timerq")

// newTracer returns the queue's tracer from tp, or from the global provider
// when tp is nil. The global provider's tracer follows a provider that the
// application installs later (otel.SetTracerProvider).
func newTracer(tp trace.TracerProvider) trace.Tracer {
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	return tp.Tracer(tracerName)
}

// traceparent formats sc as a W3C traceparent header, or returns "" unless
// sc is valid and sampled: only a sampled trace is worth carrying to the
// fire, and an untraced timer then stores nothing.
func traceparent(sc trace.SpanContext) string {
	if !sc.IsValid() || !sc.IsSampled() {
		return ""
	}
	return "00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-01"
}

// withRemoteParent returns ctx with the span context of the traceparent tp
// as its remote parent, and whether tp was one. A malformed tp (written by
// something other than timerq) is ignored. It parses the version 00 form
// that traceparent writes by hand: propagation.TraceContext's Extract
// costs a fired timer a few allocations more, on the claim path.
func withRemoteParent(ctx context.Context, tp string) (context.Context, bool) {
	if len(tp) != 55 || tp[:3] != "00-" || tp[35] != '-' || tp[52] != '-' {
		return ctx, false
	}
	tid, err1 := trace.TraceIDFromHex(tp[3:35])
	sid, err2 := trace.SpanIDFromHex(tp[36:52])
	flags, err3 := strconv.ParseUint(tp[53:], 16, 8)
	if err1 != nil || err2 != nil || err3 != nil {
		return ctx, false
	}
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.TraceFlags(flags), Remote: true})
	return trace.ContextWithRemoteSpanContext(ctx, sc), true
}

// endSpan ends span, recording err as its status.
func endSpan(span trace.Span, err error, opts ...trace.SpanEndOption) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End(opts...)
}

// startSchedule starts the span of one schedule call and returns the
// traceparent to store with its new timers ("" when the span is not
// sampled).
func (q *Queue) startSchedule(ctx context.Context, timers []NewTimer) (context.Context, trace.Span, string) {
	ctx, span := q.tracer.Start(ctx, spanSchedule, trace.WithSpanKind(trace.SpanKindProducer))
	if span.IsRecording() {
		span.SetAttributes(systemTimerq, attrNamespace.String(q.opts.Namespace), attrBatch.Int(len(timers)))
		if len(timers) == 1 {
			span.SetAttributes(attrTimerID.String(timers[0].ID))
		}
	}
	return ctx, span, traceparent(span.SpanContext())
}

// endSchedule ends the span of a schedule call.
func endSchedule(span trace.Span, out []ScheduleResult, err error) {
	if span.IsRecording() && err == nil {
		created := 0
		for _, r := range out {
			if r.Created {
				created++
			}
		}
		span.SetAttributes(attrCreated.Int(created))
		if len(out) == 1 {
			span.SetAttributes(attrDue.Int64(millis(out[0].Timer.Due)))
		}
	}
	endSpan(span, err)
}

// traceClaim records a claim of shard k that ran from start until now: a
// timerq.claim span, unless it fired nothing and did not fail (an idle
// poller makes no spans), and a timerq.fire span for each fired timer that
// was scheduled inside a trace (tps[i], the traceparent claim.lua returned;
// tps is nil when no timer had one): a child of the schedule span, linked
// to the claim span. Other timers get no span of their own (the claim span
// counts them), so the cost follows what the application samples.
func (q *Queue) traceClaim(ctx context.Context, k, limit int, start time.Time, res ClaimResult, tps []string, err error) {
	if err == nil && len(res.Fired) == 0 {
		return
	}
	_, span := q.tracer.Start(ctx, spanClaim, trace.WithTimestamp(start))
	end := trace.WithTimestamp(time.Now())
	if span.IsRecording() {
		var maxLate time.Duration
		for _, f := range res.Fired {
			maxLate = max(maxLate, f.Lateness())
		}
		span.SetAttributes(systemTimerq, attrNamespace.String(q.opts.Namespace), attrShard.Int(k),
			attrLimit.Int(limit), attrFired.Int(len(res.Fired)), attrMaxLate.Int64(maxLate.Milliseconds()))
	}
	if tps == nil {
		endSpan(span, err, end)
		return
	}
	// The fire spans' start options, built once a claim.
	opts := []trace.SpanStartOption{trace.WithTimestamp(start), trace.WithSpanKind(trace.SpanKindConsumer)}
	if sc := span.SpanContext(); sc.IsValid() {
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: sc}))
	}
	for i, f := range res.Fired {
		pctx, ok := withRemoteParent(ctx, tps[i])
		if !ok {
			continue
		}
		_, fs := q.tracer.Start(pctx, spanFire, opts...)
		if fs.IsRecording() {
			fs.SetAttributes(systemTimerq, attrNamespace.String(q.opts.Namespace), attrShard.Int(k),
				attrTimerID.String(f.ID), attrDue.Int64(millis(f.Due)), attrLateness.Int64(f.Lateness().Milliseconds()))
		}
		fs.End(end)
	}
	endSpan(span, err, end)
}

// runHandler runs the consumer's handler on one delivery inside a
// timerq.consume span: a child of the span that scheduled the timer when
// its fire event carries a traceparent (linked to any span in ctx), else of
// ctx's span. The handler's ctx carries the span, so its own spans join the
// trace.
func (q *Queue) runHandler(ctx context.Context, group, consumer string, handler func(context.Context, Event) error, ev Event) error {
	opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindConsumer)}
	pctx, remote := withRemoteParent(ctx, ev.TraceParent)
	if remote {
		if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
			opts = append(opts, trace.WithLinks(trace.Link{SpanContext: sc}))
		}
	}
	hctx, span := q.tracer.Start(pctx, spanConsume, opts...)
	if span.IsRecording() {
		span.SetAttributes(systemTimerq, attrNamespace.String(q.opts.Namespace), attrTimerID.String(ev.ID),
			attrDue.Int64(millis(ev.Due)), attrLateness.Int64(ev.FiredAt.Sub(ev.Due).Milliseconds()),
			attrGroup.String(group), attrConsumer.String(consumer), attrAttempt.Int(ev.Attempt),
			attrStreamID.String(ev.StreamID))
	}
	err := handler(hctx, ev)
	endSpan(span, err)
	return err
}
