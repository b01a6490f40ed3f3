package queue_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/queue"
)

// Deliveries.Target names a scheduled timer's endpoint (its name alone, without
// the timer's own URL or flow key), a fired one's from the
// fire of its newest attempt, a cancelled one's as it was scheduled, and
// none for a fired timer without attempts, a timer that does not deliver,
// or an unknown one.
func TestDeliveryTarget(t *testing.T) {
	redistest.ForEachAll(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		q := newQueue(t, b, queue.Options{})
		for _, name := range []string{"billing", "audit"} {
			ep := queue.Endpoint{Name: name, URL: "https://" + name + ".example.com/hook",
				Secrets: []queue.Secret{queue.Secret("whsec_" + strings.Repeat("QUFB", 8))}}
			if _, err := q.Endpoints().Put(ctx, ep, nil); err != nil {
				t.Fatal(err)
			}
		}
		if err := q.Deliveries().SetPolicy(ctx, queue.DeliveryPolicy{AllowTimerURLs: true}); err != nil {
			t.Fatal(err)
		}
		past, later := time.Now().Add(-time.Second), time.Now().Add(time.Hour)
		if _, err := q.ScheduleBatch(ctx, []queue.NewTimer{
			{ID: "later", Due: later, Endpoint: "billing"},
			{ID: "own-url", Due: later, Endpoint: "billing", URL: "https://own.example.com/t"},
			{ID: "flowing", Due: later, Endpoint: "billing", URL: "https://own.example.com/t", FlowKey: "acme"},
			{ID: "flow-only", Due: later, FlowKey: "acme"},
			{ID: "gone", Due: later, Endpoint: "billing"},
			{ID: "fired", Due: past, Endpoint: "audit"},
			{ID: "unsent", Due: past, Endpoint: "audit"},
			{ID: "plain", Due: later},
		}); err != nil {
			t.Fatal(err)
		}
		if _, err := q.Cancel(ctx, "gone"); err != nil {
			t.Fatal(err)
		}
		if res, err := q.Engine().Claim(ctx, 10); err != nil || len(res.Fired) != 2 {
			t.Fatalf("claim: %+v %v", res, err)
		}
		// One attempt of "fired" is logged, with its fire's entry.
		o := queue.LeaseOptions{Lease: time.Minute, Count: 10}
		var ds []queue.Delivery
		redistest.Eventually(t, 10*time.Second, "the two fires to be leased", func() bool {
			got, err := q.Lease(ctx, "g", "c", o)
			if err != nil {
				t.Fatal(err)
			}
			ds = append(ds, got...)
			return len(ds) == 2
		})
		for _, d := range ds {
			if d.Event.ID != "fired" {
				continue
			}
			a := queue.DeliveryAttempt{TimerID: "fired", Attempt: 1, Due: d.Event.Due, StreamID: d.Event.StreamID, At: time.Now(),
				Status: 204, Outcome: "delivered"}
			if acked, err := q.Deliveries().AckAttempt(ctx, "g", d.DeliveryID, a); err != nil || !acked {
				t.Fatalf("AckAttempt: %v %v", acked, err)
			}
		}
		for id, want := range map[string]string{"later": "billing", "own-url": "billing", "flowing": "billing", "flow-only": "", "fired": "audit", "unsent": "", "gone": "billing", "plain": "", "nope": ""} {
			if got, err := q.Deliveries().Target(ctx, id); err != nil || got != want {
				t.Errorf("DeliveryTarget(%q) = %q, %v; want %q", id, got, err, want)
			}
		}
		if _, err := q.Deliveries().Target(ctx, ""); err == nil {
			t.Error("DeliveryTarget of an empty ID: no error")
		}
	})
}
