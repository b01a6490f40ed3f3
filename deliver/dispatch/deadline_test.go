package dispatch_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/timerq/timerq/deliver"
	"github.com/timerq/timerq/deliver/dispatch"
	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/queue"
)

// A dispatcher never sends a fire past its deadline: a fire leased in time
// that waited for its endpoint's one slot until after its deadline is not
// sent but dead-lettered for it, its attempt logged with the outcome
// dead_letter and the reason deadline, and counted; so is one of a
// disabled endpoint whose deadline comes before it would be looked at
// again; a failed attempt whose retry would begin past the deadline is
// dead-lettered for it, not retried; fires within their deadline are
// delivered, or retried, as usual.
func TestDispatcherNeverSendsPastTheDeadline(t *testing.T) {
	t.Parallel() // each arm its own namespace, receivers and dispatcher
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		q := newQueue(t, b)
		var mu sync.Mutex
		got := map[string]int{} // requests by timer ID (the payload)
		record := func(r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			mu.Lock()
			got[string(body)]++
			mu.Unlock()
		}
		unblock := make(chan struct{})
		var once sync.Once
		release := func() { once.Do(func() { close(unblock) }) }
		slow := newSink(t, func(w http.ResponseWriter, r *http.Request) {
			record(r)
			select {
			case <-unblock:
				w.WriteHeader(http.StatusNoContent)
			case <-r.Context().Done():
			}
		})
		throttled := newSink(t, func(w http.ResponseWriter, r *http.Request) {
			record(r)
			w.Header().Set("Retry-After", "50")
			w.WriteHeader(http.StatusServiceUnavailable)
		})
		fast := newSink(t, func(w http.ResponseWriter, r *http.Request) { record(r); w.WriteHeader(http.StatusNoContent) })
		endpoints := map[string]deliver.Endpoint{
			"slow":      {URL: slow.URL, MaxInFlight: 1, Timeout: time.Minute},
			"throttled": {URL: throttled.URL},
			"fast":      {URL: fast.URL},
			"off":       {URL: fast.URL, Disabled: true},
		}
		m := dispatch.NewMetrics(nil)
		reports := map[string][]dispatch.Report{}
		d := &dispatch.Dispatcher{
			Queue:    q,
			Consumer: "d1",
			Sender:   newSender(t, &deliver.Guard{Allow: loopback}),
			Route:    func(ev queue.Event) string { name, _, _ := strings.Cut(ev.ID, "/"); return name },
			Lookup: func(_ context.Context, name string) (deliver.Endpoint, error) {
				return endpoints[name], nil
			},
			OnAttempt: recordReports(&mu, reports, m),
			OnError:   func(err error) { t.Errorf("dispatcher: %v", err) },
		}
		now, err := b.Client.Time(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		due, deadline := now.Add(-time.Second), now.Add(5*time.Second).Truncate(time.Millisecond)
		timer := func(id string, by time.Time) queue.NewTimer {
			return queue.NewTimer{ID: id, Due: due, Payload: []byte(id), FireBy: by}
		}
		// slow/first takes the slow endpoint's one slot and keeps it past
		// slow/late's deadline; the others' deadlines are an hour away but
		// throttled/late's, whose retry (after 50 s) would come after it,
		// and off/late's, whose endpoint is disabled for longer.
		// One batch after the other, so that slow/first comes first in the
		// stream.
		for _, batch := range [][]queue.NewTimer{{timer("slow/first", time.Time{})},
			{timer("slow/late", deadline), timer("throttled/late", deadline), timer("throttled/within", now.Add(time.Hour)),
				timer("fast/within", now.Add(time.Hour)), timer("off/late", deadline)}} {
			if _, err := q.ScheduleBatch(ctx, batch); err != nil {
				t.Fatal(err)
			}
			if res, err := q.Engine().Claim(ctx, queue.MaxBatch); err != nil || len(res.Fired) != len(batch) {
				t.Fatalf("Claim = %+v, %v; want %d fired", res, err, len(batch))
			}
		}

		defer release() // before the dispatcher stops: it waits for the request under way
		startDispatcher(t, d)
		// Once the others are settled, the dispatcher holds slow/first,
		// under way, and slow/late, waiting for the slot.
		redistest.Eventually(t, 30*time.Second, "slow/first sent, slow/late held behind it, the others attempted", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return got["slow/first"] == 1 && len(reports["throttled/late"]) == 1 && len(reports["throttled/within"]) == 1 &&
				len(reports["fast/within"]) == 1 && len(reports["off/late"]) == 1 && d.Held() == 2
		})
		if s, err := b.Client.Time(ctx).Result(); err != nil || !s.Before(deadline) {
			t.Fatalf("the dispatcher held slow/late only at %v, after its deadline %v: too slow a machine for this test (%v)", s, deadline, err)
		}
		redistest.AwaitServerTime(t, b.Client, deadline.Add(10*time.Millisecond))
		release()
		redistest.Eventually(t, 30*time.Second, "slow/first delivered and slow/late settled", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(reports["slow/first"]) == 1 && len(reports["slow/late"]) == 1
		})

		mu.Lock()
		defer mu.Unlock()
		if got["slow/late"] != 0 {
			t.Errorf("slow/late was sent %d times past its deadline", got["slow/late"])
		}
		if got["throttled/late"] != 1 || got["throttled/within"] != 1 || got["fast/within"] != 1 {
			t.Errorf("requests %v, want one each of throttled/late, throttled/within and fast/within", got)
		}
		if r := reports["slow/late"][0]; !r.Unsent || r.Number != 1 || r.Attempt.Outcome != deliver.DeadLetter || r.Attempt.Reason != deliver.ReasonDeadline || r.SettleErr != nil {
			t.Errorf("report of slow/late %+v; want unsent, attempt 1, dead_letter for the deadline", r)
		}
		if r := reports["off/late"][0]; !r.Unsent || r.Number != 1 || r.Attempt.Reason != deliver.ReasonDeadline {
			t.Errorf("report of off/late %+v; want unsent, attempt 1, for the deadline", r)
		}
		if r := reports["throttled/late"][0]; r.Unsent || r.Attempt.Outcome != deliver.DeadLetter || r.Attempt.Reason != deliver.ReasonDeadline ||
			r.Attempt.Cause != deliver.ReasonRetryAfter {
			t.Errorf("report of throttled/late %+v; want sent, then dead_letter for the deadline after retry_after", r)
		}
		if r := reports["throttled/within"][0]; r.Attempt.Outcome != deliver.Retry {
			t.Errorf("report of throttled/within %+v; want a retry", r)
		}
		if r := reports["fast/within"][0]; r.Attempt.Outcome != deliver.Delivered {
			t.Errorf("report of fast/within %+v; want delivered", r)
		}

		// The dead letters, the attempt logs and the counts say so.
		page, err := q.Deliveries().DeadLetters(ctx, queue.DeadLetterListOptions{Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		why := map[string]string{}
		for _, dl := range page.DeadLetters {
			why[dl.Event.ID] = dl.Error
		}
		if len(why) != 3 || !strings.HasPrefix(why["slow/late"], "deadline: not sent: attempt 1 would begin at") ||
			!strings.HasPrefix(why["throttled/late"], "deadline after retry_after: HTTP 503") ||
			!strings.HasPrefix(why["off/late"], "deadline: not sent: its next attempt, after endpoint disabled, would begin at") {
			t.Errorf("dead letters %v; want slow/late, throttled/late and off/late, for the deadline", why)
		}
		for id, sent := range map[string]bool{"slow/late": false, "throttled/late": true, "off/late": false} {
			log, err := q.Deliveries().Attempts(ctx, id)
			if err != nil || len(log) != 1 {
				t.Fatalf("attempt log of %s: %+v, %v; want one attempt", id, log, err)
			}
			if a := log[0]; a.Attempt != 1 || a.Outcome != "dead_letter" || a.Reason != queue.ReasonDeadline || (a.Status != 0) != sent {
				t.Errorf("attempt log of %s: %+v; want attempt 1, dead_letter, reason deadline, sent %v", id, a, sent)
			}
		}
		for ep, want := range map[string]float64{"slow": 1, "throttled": 1, "off": 1, "fast": 0} {
			if n := testutil.ToFloat64(m.DeadLetters.WithLabelValues(ep, "deadline")); n != want {
				t.Errorf("timerq_delivery_dead_letters_total{endpoint=%q,reason=\"deadline\"} = %v, want %v", ep, n, want)
			}
		}
		if n := testutil.ToFloat64(m.Deliveries.WithLabelValues("slow", "dead_letter")); n != 0 {
			t.Errorf("timerq_deliveries_total{endpoint=slow,outcome=dead_letter} = %v, want 0: an attempt not sent is none", n)
		}
		c, err := q.Inspect().Counters(ctx)
		if err != nil || c.DeadlineDeadLetters != 3 {
			t.Errorf("Counters.DeadlineDeadLetters = %d, %v; want 3", c.DeadlineDeadLetters, err)
		}
	})
}

// A fire already past its deadline when a dispatcher leases it is
// dead-lettered by the lease, never sent; the dispatcher still logs the
// attempt it did not make (dead_letter, reason deadline) in the timer's
// attempt log, reports it unsent and counts it, so that the log says why
// the fire went to the dead letters. A fire that delivers nowhere has no
// log.
func TestDispatcherLogsFiresTheLeaseDeadLettered(t *testing.T) {
	t.Parallel() // each arm its own namespace, receiver and dispatcher
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		q := newQueue(t, b)
		var mu sync.Mutex
		got := map[string]int{} // requests by timer ID (the payload)
		sink := newSink(t, func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			mu.Lock()
			got[string(body)]++
			mu.Unlock()
			w.WriteHeader(http.StatusNoContent)
		})
		m := dispatch.NewMetrics(nil)
		reports := map[string][]dispatch.Report{}
		d := &dispatch.Dispatcher{
			Queue:    q,
			Consumer: "d1",
			Sender:   newSender(t, &deliver.Guard{Allow: loopback}),
			Route: func(ev queue.Event) string {
				name, _, _ := strings.Cut(ev.ID, "/")
				if name == "nowhere" {
					return ""
				}
				return name
			},
			Lookup: func(context.Context, string) (deliver.Endpoint, error) {
				return deliver.Endpoint{URL: sink.URL}, nil
			},
			OnAttempt: recordReports(&mu, reports, m),
			OnError:   func(err error) { t.Errorf("dispatcher: %v", err) },
		}
		now, err := b.Client.Time(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		due := now.Add(-time.Minute)
		batch := []queue.NewTimer{
			{ID: "fast/late", Due: due, Payload: []byte("fast/late"), FireWithin: time.Second},
			{ID: "fast/within", Due: due, Payload: []byte("fast/within"), FireBy: now.Add(time.Hour)},
			{ID: "nowhere/late", Due: due, Payload: []byte("nowhere/late"), FireWithin: time.Second},
		}
		if _, err := q.ScheduleBatch(ctx, batch); err != nil {
			t.Fatal(err)
		}
		res, err := q.Engine().Claim(ctx, queue.MaxBatch)
		if err != nil || len(res.Fired) != len(batch) {
			t.Fatalf("Claim = %+v, %v; want %d fired", res, err, len(batch))
		}

		startDispatcher(t, d)
		redistest.Eventually(t, 30*time.Second, "fast/within delivered and fast/late reported", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(reports["fast/within"]) == 1 && len(reports["fast/late"]) == 1
		})

		mu.Lock()
		defer mu.Unlock()
		if got["fast/late"] != 0 || got["nowhere/late"] != 0 || got["fast/within"] != 1 {
			t.Errorf("requests %v, want fast/within's alone", got)
		}
		if r := reports["fast/late"][0]; !r.Unsent || r.Number != 1 || r.Endpoint != "fast" || r.Attempt.Outcome != deliver.DeadLetter ||
			r.Attempt.Reason != deliver.ReasonDeadline {
			t.Errorf("report of fast/late %+v; want unsent, attempt 1 to fast, dead_letter for the deadline", r)
		}
		if rs := reports["nowhere/late"]; len(rs) != 0 {
			t.Errorf("reports of nowhere/late %+v, want none: it delivers nowhere", rs)
		}
		page, err := q.Deliveries().DeadLetters(ctx, queue.DeadLetterListOptions{Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		streamID := map[string]string{}
		for _, dl := range page.DeadLetters {
			streamID[dl.Event.ID] = dl.FireStreamID
		}
		if len(streamID) != 2 || streamID["fast/late"] == "" || streamID["nowhere/late"] == "" {
			t.Fatalf("dead letters of %v, want fast/late and nowhere/late", streamID)
		}
		log, err := q.Deliveries().Attempts(ctx, "fast/late")
		if err != nil || len(log) != 1 {
			t.Fatalf("attempt log of fast/late: %+v, %v; want one attempt", log, err)
		}
		if a := log[0]; a.Attempt != 1 || a.Outcome != "dead_letter" || a.Reason != queue.ReasonDeadline || a.Status != 0 ||
			!strings.HasPrefix(a.Error, queue.ReasonDeadline+": not handed out") || a.StreamID != streamID["fast/late"] || !a.Due.Equal(due.Truncate(time.Millisecond)) {
			t.Errorf("attempt log of fast/late: %+v; want attempt 1 of fire %s, dead_letter, reason deadline, not handed out, unsent",
				a, streamID["fast/late"])
		}
		if log, err := q.Deliveries().Attempts(ctx, "nowhere/late"); err != nil || len(log) != 0 {
			t.Errorf("attempt log of nowhere/late: %+v, %v; want none", log, err)
		}
		if n := testutil.ToFloat64(m.DeadLetters.WithLabelValues("fast", "deadline")); n != 1 {
			t.Errorf("timerq_delivery_dead_letters_total{endpoint=\"fast\",reason=\"deadline\"} = %v, want 1", n)
		}
		c, err := q.Inspect().Counters(ctx)
		if err != nil || c.DeadlineDeadLetters != 2 {
			t.Errorf("Counters.DeadlineDeadLetters = %d, %v; want 2 (fast/late and nowhere/late)", c.DeadlineDeadLetters, err)
		}
	})
}
