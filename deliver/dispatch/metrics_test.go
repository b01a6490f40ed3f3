package dispatch_test

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/timerq/timerq/deliver"
	"github.com/timerq/timerq/deliver/dispatch"
	"github.com/timerq/timerq/queue"
)

// Observe counts each attempt by endpoint and outcome, dead letters by
// reason, the lateness of delivered fires only, and not an attempt cut
// short by a stop; a fire not sent for its deadline counts as a dead letter
// only; the in-flight gauge reads the function it was given.
func TestMetricsObserve(t *testing.T) {
	held := 3
	m := dispatch.NewMetrics(func() int { return held })
	reg := prometheus.NewRegistry()
	if err := m.Register(reg); err != nil {
		t.Fatal(err)
	}
	due := time.Now().Add(-2 * time.Second)
	report := func(ep string, o deliver.Outcome, reason deliver.Reason, stopped bool) {
		m.Observe(dispatch.Report{Event: queue.Event{Due: due}, Endpoint: ep, Stopped: stopped,
			Attempt: deliver.Attempt{At: due.Add(time.Second), Latency: 500 * time.Millisecond, Decision: deliver.Decision{Outcome: o, Reason: reason}}})
	}
	report("a", deliver.Retry, deliver.ReasonServerError, false)
	report("a", deliver.Delivered, deliver.ReasonOK, false)
	report("b", deliver.DeadLetter, deliver.ReasonGone, false)
	report("b", deliver.Retry, deliver.ReasonConnection, true) // stopped: not counted
	m.Observe(dispatch.Report{Event: queue.Event{Due: due}, Endpoint: "c", Unsent: true, Number: 1,
		Attempt: deliver.Attempt{At: due.Add(time.Second), Decision: deliver.Decision{Outcome: deliver.DeadLetter, Reason: deliver.ReasonDeadline}}})
	for _, c := range []struct {
		got  float64
		want float64
		what string
	}{
		{testutil.ToFloat64(m.Deliveries.WithLabelValues("a", "retry")), 1, "a retry"},
		{testutil.ToFloat64(m.Deliveries.WithLabelValues("a", "delivered")), 1, "a delivered"},
		{testutil.ToFloat64(m.Deliveries.WithLabelValues("b", "dead_letter")), 1, "b dead letter"},
		{testutil.ToFloat64(m.Deliveries.WithLabelValues("b", "retry")), 0, "b stopped"},
		{testutil.ToFloat64(m.DeadLetters.WithLabelValues("b", "gone")), 1, "b gone"},
		{testutil.ToFloat64(m.Retries.WithLabelValues("a")), 1, "a retries"},
		{testutil.ToFloat64(m.DeadLetters.WithLabelValues("c", "deadline")), 1, "c deadline"},
		{testutil.ToFloat64(m.Deliveries.WithLabelValues("c", "dead_letter")), 0, "c unsent: no attempt"},
	} {
		if c.got != c.want {
			t.Errorf("%s: %v, want %v", c.what, c.got, c.want)
		}
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		switch mf.GetName() {
		case "timerq_delivery_lateness_seconds":
			h := mf.GetMetric()[0].GetHistogram()
			if len(mf.GetMetric()) != 1 || h.GetSampleCount() != 1 || h.GetSampleSum() != 1.5 {
				t.Errorf("lateness: %v", mf)
			}
		case "timerq_deliveries_in_flight":
			if v := mf.GetMetric()[0].GetGauge().GetValue(); v != 3 {
				t.Errorf("in flight %v, want 3", v)
			}
		case "timerq_delivery_attempt_seconds":
			for _, mt := range mf.GetMetric() {
				if mt.GetLabel()[0].GetValue() == "c" {
					t.Errorf("an attempt not sent has a duration: %v", mt)
				}
			}
		}
	}
}

// Delivery delay, fired to first attempt, is observed apart from the fire's
// lateness, by flow (keyed or none), with no label per key.
func TestMetricsDeliveryDelayApartFromLateness(t *testing.T) {
	m := dispatch.NewMetrics(nil)
	due := time.Now().Add(-2 * time.Second)
	fired := due.Add(250 * time.Millisecond)
	for _, r := range []dispatch.Report{
		{Event: queue.Event{Due: due, FiredAt: fired, FlowKey: "tenant-1"}, Endpoint: "a", Number: 1,
			Attempt: deliver.Attempt{At: due.Add(time.Second), Decision: deliver.Decision{Outcome: deliver.Delivered}}},
		{Event: queue.Event{Due: due, FiredAt: fired}, Endpoint: "a", Number: 1,
			Attempt: deliver.Attempt{At: fired, Decision: deliver.Decision{Outcome: deliver.Delivered}}},
		{Event: queue.Event{Due: due, FiredAt: fired, FlowKey: "tenant-1"}, Endpoint: "a", Number: 2, // a retry: not counted
			Attempt: deliver.Attempt{At: due.Add(time.Minute), Decision: deliver.Decision{Outcome: deliver.Delivered}}},
	} {
		m.Observe(r)
	}
	if n := testutil.CollectAndCount(m.DeliveryDelay); n != 2 {
		t.Fatalf("%d delivery delay series, want 2 (keyed, none)", n)
	}
	keyed := m.DeliveryDelay.WithLabelValues("a", "keyed").(prometheus.Histogram)
	var mm dto.Metric
	if err := keyed.Write(&mm); err != nil {
		t.Fatal(err)
	}
	if h := mm.GetHistogram(); h.GetSampleCount() != 1 || h.GetSampleSum() != 0.75 {
		t.Fatalf("keyed delay: %d samples summing %v, want one of 0.75 s", h.GetSampleCount(), h.GetSampleSum())
	}
}
