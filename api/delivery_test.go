package api_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/timerq/timerq/api"
	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/queue"
)

// GET of a fired timer whose fire a dispatcher tried shows its attempt
// log under "delivery", as the contract describes it; a timer without one
// has no "delivery".
func TestGetTimerShowsAttemptLog(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		e := newEnv(t, b, api.Options{})
		ctx := context.Background()
		for _, id := range []string{"hook", "plain"} {
			if _, err := e.q.Schedule(ctx, id, time.Now().Add(-time.Second), []byte("x")); err != nil {
				t.Fatal(err)
			}
		}
		if res, err := e.q.Engine().Claim(ctx, 10); err != nil || len(res.Fired) != 2 {
			t.Fatalf("claim: %+v %v", res, err)
		}
		o := queue.LeaseOptions{Lease: time.Minute, MaxAttempts: 10, Count: 10}
		ds, err := e.q.Lease(ctx, "g", "c", o)
		if err != nil || len(ds) != 2 {
			t.Fatalf("lease: %v %v", ds, err)
		}
		for _, d := range ds {
			if d.ID != "hook" {
				continue
			}
			a := queue.DeliveryAttempt{TimerID: "hook", Attempt: 1, Due: d.Due, At: time.Now(), Latency: 2500 * time.Microsecond,
				Status: 503, Outcome: "retry", Reason: "throttled", Error: "busy", RetryIn: 1500 * time.Millisecond}
			if _, err := e.q.Release(ctx, "g", d.DeliveryID, queue.ReleaseOptions{Delay: time.Second, Log: &a}, o); err != nil {
				t.Fatal(err)
			}
		}
		r := e.do(ctx, "GET", e.url("/timers/hook"), nil)
		if r.Status != http.StatusOK {
			t.Fatalf("GET: %d %s", r.Status, r.Body)
		}
		j := r.timer(t)
		if j.Delivery == nil || len(j.Delivery.Attempts) != 1 {
			t.Fatalf("GET hook: %s; want one attempt under delivery", r.Body)
		}
		got := j.Delivery.Attempts[0]
		if got.Attempt != 1 || got.Status != 503 || got.Outcome != "retry" || got.Reason != "throttled" || got.Error != "busy" ||
			got.LatencyMS != 2.5 || got.RetryIn != "1.5s" {
			t.Errorf("attempt %+v", got)
		}
		if j := e.do(ctx, "GET", e.url("/timers/plain"), nil).timer(t); j.Delivery != nil {
			t.Errorf("a timer without attempts shows delivery %+v", j.Delivery)
		}
	})
}
