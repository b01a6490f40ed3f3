package dispatch_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/timerq/timerq/deliver"
	"github.com/timerq/timerq/deliver/dispatch"
	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/queue"
)

func testSecret() queue.Secret { return queue.Secret(deliver.GenerateSecret()) }

// With neither Route nor Lookup, a dispatcher delivers each fire to the
// endpoint its timer names, as the queue stores it: the stored secret
// signs, the traceparent the fire carries is sent on, a disabled
// endpoint's fires wait (not dead-lettered, using up no attempt) and
// arrive once it is enabled,
// and a fire naming an endpoint deleted since is dead-lettered.
func TestDispatcherDeliversToQueueEndpoints(t *testing.T) {
	t.Parallel() // each arm its own namespace, receiver and dispatcher
	redistest.ForEachAll(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		ns := redistest.Namespace(t)
		if b.Shards > 1 {
			if _, err := queue.CreateNamespace(ctx, b.Client, ns, b.Shards); err != nil {
				t.Fatal(err)
			}
		}
		q, err := queue.New(b.Client, queue.Options{Namespace: ns})
		if err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		got := map[string]http.Header{}
		sink := newSink(t, func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			got[r.Header.Get(deliver.HeaderTimerID)] = r.Header.Clone()
			mu.Unlock()
			w.WriteHeader(http.StatusNoContent)
		})
		sec := testSecret()
		allow := &queue.PutEndpointOptions{Allow: loopback}
		for _, name := range []string{"on", "off", "doomed"} {
			e := queue.Endpoint{Name: name, URL: sink.URL + "/" + name, Secrets: []queue.Secret{sec}, Disabled: name == "off"}
			if _, err := q.Endpoints().Put(ctx, e, allow); err != nil {
				t.Fatal(err)
			}
		}
		past := time.Now().Add(-time.Second)
		if _, err := q.ScheduleBatch(ctx, []queue.NewTimer{
			{ID: "a", Due: past, Endpoint: "on", Payload: []byte(`{}`), Owner: "wf/1 x"},
			{ID: "b", Due: past, Endpoint: "off", Payload: []byte(`{}`)},
			{ID: "c", Due: past, Endpoint: "doomed", Payload: []byte(`{}`)},
		}); err != nil {
			t.Fatal(err)
		}
		if err := q.Endpoints().Delete(ctx, "doomed"); err != nil {
			t.Fatal(err)
		}
		for fired := 0; fired < 3; {
			res, err := q.Engine().Claim(ctx, 10)
			if err != nil || len(res.Fired) == 0 {
				t.Fatalf("claim: %+v %v (fired %d of 3)", res, err, fired)
			}
			fired += len(res.Fired)
		}
		d := &dispatch.Dispatcher{Queue: q, Consumer: "d1", Sender: newSender(t, &deliver.Guard{Allow: loopback}), Lease: 2 * time.Second}
		startDispatcher(t, d)
		received := func(id string) http.Header {
			mu.Lock()
			defer mu.Unlock()
			return got[id]
		}
		redistest.Eventually(t, 10*time.Second, "the enabled endpoint receives its fire", func() bool { return received("a") != nil })
		h := received("a")
		key, _ := deliver.ParseSecret(sec.Reveal())
		if err := deliver.Verify(h, []byte(`{}`), time.Now(), key); err != nil {
			t.Errorf("the stored secret's signature does not verify: %v", err)
		}
		// The fire's owner and epoch go along, for the receiver to fence by.
		if o, e := h.Get(deliver.HeaderOwner), h.Get(deliver.HeaderEpoch); o != "wf%2F1%20x" || e != "0" {
			t.Errorf("owned timer's delivery: %s %q, %s %q; want wf%%2F1%%20x and 0", deliver.HeaderOwner, o, deliver.HeaderEpoch, e)
		}
		// The deleted endpoint's fire is dead-lettered.
		redistest.Eventually(t, 10*time.Second, "the deleted endpoint's fire is dead-lettered", func() bool {
			page, err := q.Deliveries().DeadLetters(ctx, queue.DeadLetterListOptions{Limit: 10})
			dls := page.DeadLetters
			return err == nil && len(dls) == 1 && dls[0].Event.ID == "c" && strings.Contains(dls[0].Error, "doomed")
		})
		// The disabled endpoint's fire waits, neither delivered nor dead-lettered.
		time.Sleep(1500 * time.Millisecond) // wall time is what is under test: a second of leases passes
		if received("b") != nil {
			t.Fatal("a disabled endpoint received a fire")
		}
		if page, _ := q.Deliveries().DeadLetters(ctx, queue.DeadLetterListOptions{Limit: 10}); len(page.DeadLetters) != 1 {
			t.Fatalf("dead letters %+v; the disabled endpoint's fire must wait", page.DeadLetters)
		}
		if _, err := q.Endpoints().SetEnabled(ctx, "off", true); err != nil {
			t.Fatal(err)
		}
		redistest.Eventually(t, 15*time.Second, "the enabled endpoint receives the fire that waited", func() bool { return received("b") != nil })
		if err := deliver.Verify(received("b"), []byte(`{}`), time.Now(), key); err != nil {
			t.Errorf("signature: %v", err)
		}
		// Handed back untried while disabled, it used up no attempt.
		if n := received("b").Get(deliver.HeaderAttempt); n != "1" {
			t.Errorf("the fire that waited arrived as attempt %s, want 1", n)
		}
		if o := received("b").Values(deliver.HeaderOwner); len(o) > 0 {
			t.Errorf("a timer without an owner was delivered with %s %q", deliver.HeaderOwner, o)
		}
		redistest.Eventually(t, 10*time.Second, "the attempt is logged", func() bool {
			log, err := q.Deliveries().Attempts(ctx, "b")
			return err == nil && len(log) == 1 && log[0].Attempt == 1 && log[0].Outcome == "delivered" && log[0].Status == 204
		})
		if received("c") != nil {
			t.Error("the deleted endpoint's fire was delivered")
		}
	})
}

// A retry delay longer than the dispatcher's lease (here a Retry-After of
// 2 s with a 300 ms lease) is kept in full: the fire comes back each lease
// and is released again, untried and using up no attempt, until the delay
// has run.
func TestDispatcherWaitsRetryDelaysLongerThanTheLease(t *testing.T) {
	t.Parallel() // each arm its own namespace, receiver and dispatcher
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		q := newQueue(t, b)
		var mu sync.Mutex
		var at []time.Time
		var attempts []string
		sink := newSink(t, func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			at = append(at, time.Now())
			attempts = append(attempts, r.Header.Get(deliver.HeaderAttempt))
			first := len(at) == 1
			mu.Unlock()
			if first {
				w.Header().Set("Retry-After", "2")
				w.WriteHeader(http.StatusServiceUnavailable)
				return
			}
			w.WriteHeader(http.StatusNoContent)
		})
		if _, err := q.Endpoints().Put(ctx, queue.Endpoint{Name: "e", URL: sink.URL, Secrets: []queue.Secret{testSecret()}},
			&queue.PutEndpointOptions{Allow: loopback}); err != nil {
			t.Fatal(err)
		}
		if _, err := q.ScheduleBatch(ctx, []queue.NewTimer{{ID: "t", Due: time.Now().Add(-time.Second), Endpoint: "e"}}); err != nil {
			t.Fatal(err)
		}
		if res, err := q.Engine().Claim(ctx, 10); err != nil || len(res.Fired) != 1 {
			t.Fatalf("claim: %+v %v", res, err)
		}
		d := &dispatch.Dispatcher{Queue: q, Consumer: "d1", Sender: newSender(t, &deliver.Guard{Allow: loopback}), Lease: 300 * time.Millisecond}
		startDispatcher(t, d)
		redistest.Eventually(t, 15*time.Second, "the retry arrives", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(at) == 2
		})
		mu.Lock()
		gap, got := at[1].Sub(at[0]), attempts
		mu.Unlock()
		// Never before the delay the endpoint asked for (less the slack
		// allowed for clocks).
		if gap < 2*time.Second-100*time.Millisecond {
			t.Errorf("the retry came %v after a Retry-After of 2 s", gap)
		}
		if len(got) != 2 || got[1] != "2" {
			t.Errorf("attempt headers %v, want [1 2]: the waits used up no attempt", got)
		}
	})
}

// An endpoint that is down (every connection cut) for a while, then up:
// every fire arrives, none is dead-lettered, and each timer's attempt log
// shows the failed attempts, with their backoff, before the delivery.
func TestDispatcherEndpointDownThenUp(t *testing.T) {
	t.Parallel() // each arm its own namespace, receiver and dispatcher
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		q := newQueue(t, b)
		var up atomic.Bool
		sink := newSink(t, func(w http.ResponseWriter, r *http.Request) {
			if !up.Load() {
				conn, _, err := w.(http.Hijacker).Hijack()
				if err == nil {
					conn.Close() // down: the connection is cut, no answer
				}
				return
			}
			w.WriteHeader(http.StatusNoContent)
		})
		if _, err := q.Endpoints().Put(ctx, queue.Endpoint{Name: "e", URL: sink.URL, Secrets: []queue.Secret{testSecret()},
			Retry: queue.RetryPolicy{MaxAttempts: 50, Base: 50 * time.Millisecond, Cap: 400 * time.Millisecond}},
			&queue.PutEndpointOptions{Allow: loopback}); err != nil {
			t.Fatal(err)
		}
		ids := []string{"a", "b", "c", "d", "e"}
		var batch []queue.NewTimer
		for _, id := range ids {
			batch = append(batch, queue.NewTimer{ID: id, Due: time.Now().Add(-time.Second), Endpoint: "e"})
		}
		if _, err := q.ScheduleBatch(ctx, batch); err != nil {
			t.Fatal(err)
		}
		if res, err := q.Engine().Claim(ctx, 10); err != nil || len(res.Fired) != len(ids) {
			t.Fatalf("claim: %+v %v", res, err)
		}
		d := &dispatch.Dispatcher{Queue: q, Consumer: "d1", Sender: newSender(t, &deliver.Guard{Allow: loopback}), Lease: 2 * time.Second}
		startDispatcher(t, d)
		// Down until every timer has failed three times.
		redistest.Eventually(t, 20*time.Second, "three failed attempts of each", func() bool {
			for _, id := range ids {
				if log, err := q.Deliveries().Attempts(ctx, id); err != nil || len(log) < 3 {
					return false
				}
			}
			return true
		})
		up.Store(true)
		redistest.Eventually(t, 20*time.Second, "every fire is delivered once the endpoint is up", func() bool {
			for _, id := range ids {
				log, err := q.Deliveries().Attempts(ctx, id)
				if err != nil || len(log) == 0 || log[len(log)-1].Outcome != "delivered" {
					return false
				}
			}
			return true
		})
		for _, id := range ids {
			log, _ := q.Deliveries().Attempts(ctx, id)
			for i, a := range log[:len(log)-1] {
				if a.Outcome != "retry" || a.Reason != "connection" || a.Attempt != i+1 || a.RetryIn > 400*time.Millisecond {
					t.Errorf("%s attempt %d: %+v; want a retry after a connection error, backoff within the cap", id, i+1, a)
				}
				if next := log[i+1]; next.At.Before(a.At.Add(a.RetryIn)) {
					t.Errorf("%s: attempt %d at %v, before attempt %d's backoff of %v from %v ran", id, next.Attempt, next.At, a.Attempt, a.RetryIn, a.At)
				}
			}
		}
		if page, _ := q.Deliveries().DeadLetters(ctx, queue.DeadLetterListOptions{Limit: 10}); len(page.DeadLetters) != 0 {
			t.Errorf("dead letters %+v; nothing should be lost", page.DeadLetters)
		}
	})
}

// A stored endpoint that this dispatcher's SSRF guard refuses (registered
// where 127.0.0.1 was allowed, delivered by a worker where it is not) can
// never be delivered to: its fires are dead-lettered, nothing is sent, the
// dead letter says why and which flag admits it, and the dispatcher
// reports it once, not once a fire or once a second.
func TestDispatcherDeadLettersAnEndpointItsGuardRefuses(t *testing.T) {
	t.Parallel() // each arm its own namespace, receiver and dispatcher
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		q := newQueue(t, b)
		sink := newSink(t, nil)
		if _, err := q.Endpoints().Put(ctx, queue.Endpoint{Name: "local", URL: sink.URL, Secrets: []queue.Secret{testSecret()}},
			&queue.PutEndpointOptions{Allow: loopback}); err != nil {
			t.Fatal(err)
		}
		ids := []string{"a", "b", "c"}
		var batch []queue.NewTimer
		for _, id := range ids {
			batch = append(batch, queue.NewTimer{ID: id, Due: time.Now().Add(-time.Second), Endpoint: "local"})
		}
		if _, err := q.ScheduleBatch(ctx, batch); err != nil {
			t.Fatal(err)
		}
		if res, err := q.Engine().Claim(ctx, 10); err != nil || len(res.Fired) != len(ids) {
			t.Fatalf("claim: %+v %v", res, err)
		}
		var mu sync.Mutex
		var reported []string
		d := &dispatch.Dispatcher{Queue: q, Consumer: "d1", Sender: newSender(t, nil), Lease: 2 * time.Second, OnError: func(err error) {
			mu.Lock()
			reported = append(reported, err.Error())
			mu.Unlock()
		}}
		startDispatcher(t, d)
		var dls []queue.DeadLetter
		redistest.Eventually(t, 10*time.Second, "every fire of the refused endpoint is dead-lettered", func() bool {
			page, err := q.Deliveries().DeadLetters(ctx, queue.DeadLetterListOptions{Limit: 10})
			dls = page.DeadLetters
			return err == nil && len(dls) == len(ids)
		})
		for _, dl := range dls {
			for _, want := range []string{`endpoint "local"`, "SSRF guard", "127.0.0.1 is a loopback address", "--deliver-allow 127.0.0.1/32", "Redrive all of local", "RedriveOptions"} {
				if !strings.Contains(dl.Error, want) {
					t.Errorf("dead letter of %s: %q does not say %q", dl.Event.ID, dl.Error, want)
				}
			}
		}
		// Each lease poll would have reported it again: wait two.
		time.Sleep(2 * time.Second) // wall time is what is under test: a report a second
		mu.Lock()
		defer mu.Unlock()
		if len(reported) != 1 || !strings.Contains(reported[0], `endpoint "local"`) || !strings.Contains(reported[0], "--deliver-allow") {
			t.Errorf("the dispatcher reported %d errors, want the refusal once: %q", len(reported), reported)
		}
		if n := sink.hits.Load(); n != 0 {
			t.Errorf("the refused endpoint got %d requests", n)
		}
	})
}
