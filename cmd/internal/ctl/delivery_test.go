package ctl_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/queue"
)

// timerctl get shows a delivering timer's attempt log: a row per attempt
// in the table, and "delivery" in JSON, the HTTP API's shape.
func TestGetShowsAttemptLog(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		c := newCLI(t, b)
		ctx := context.Background()
		if _, err := c.q.Schedule(ctx, "hook", time.Now().Add(-time.Second), []byte("x")); err != nil {
			t.Fatal(err)
		}
		if res, err := c.q.Engine().Claim(ctx, 10); err != nil || len(res.Fired) != 1 {
			t.Fatalf("claim: %+v %v", res, err)
		}
		o := queue.LeaseOptions{Lease: time.Minute, MaxAttempts: 10}
		ds, err := c.q.Lease(ctx, "g", "c", o)
		if err != nil || len(ds) != 1 {
			t.Fatalf("lease: %v %v", ds, err)
		}
		a := queue.DeliveryAttempt{TimerID: "hook", Attempt: 1, Due: ds[0].Due, At: time.Now(), Latency: 2500 * time.Microsecond,
			Status: 500, Outcome: "retry", Reason: "server_error", Error: "boom", RetryIn: time.Second}
		if _, err := c.q.Release(ctx, "g", ds[0].DeliveryID, queue.ReleaseOptions{Log: &a}, o); err != nil {
			t.Fatal(err)
		}
		out := c.ok("get", "hook").stdout
		if !strings.Contains(out, `#1`) || !strings.Contains(out, "HTTP 500 in 2.5ms: retry (server_error), next in 1s: \"boom\"") {
			t.Errorf("get does not show the attempt:\n%s", out)
		}
		type withDelivery struct {
			timerJSON
			Delivery *struct {
				Attempts []struct {
					Attempt   int     `json:"attempt"`
					DueAt     string  `json:"due_at"`
					At        string  `json:"at"`
					LatencyMS float64 `json:"latency_ms"`
					Status    int     `json:"status"`
					Outcome   string  `json:"outcome"`
					Reason    string  `json:"reason"`
					Error     string  `json:"error"`
					RetryIn   string  `json:"retry_in"`
				} `json:"attempts"`
			} `json:"delivery"`
		}
		j := decode[withDelivery](t, c.ok("get", "hook", "-o", "json").stdout)
		if j.Delivery == nil || len(j.Delivery.Attempts) != 1 || j.Delivery.Attempts[0].Status != 500 || j.Delivery.Attempts[0].LatencyMS != 2.5 {
			t.Errorf("get -o json: %+v", j.Delivery)
		}
	})
}
