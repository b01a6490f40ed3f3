package dispatch_test

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/timerq/timerq/deliver"
	"github.com/timerq/timerq/deliver/dispatch"
	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/queue"
)

// Redrive requeues an endpoint's dead-lettered deliveries, and only its:
// they are delivered again as a fresh first attempt with the same
// webhook-id, and the other endpoint's dead letter stays.
func TestRedriveAnEndpointsDeadLetters(t *testing.T) {
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
		var fixed atomic.Bool
		var mu sync.Mutex
		var got []http.Header
		sink := newSink(t, func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			got = append(got, r.Header.Clone())
			mu.Unlock()
			if fixed.Load() && r.URL.Path == "/flaky" {
				w.WriteHeader(http.StatusNoContent)
				return
			}
			w.WriteHeader(http.StatusGone)
		})
		for _, name := range []string{"flaky", "other"} {
			if _, err := q.Endpoints().Put(ctx, queue.Endpoint{Name: name, URL: sink.URL + "/" + name, Secrets: []queue.Secret{testSecret()}},
				&queue.PutEndpointOptions{Allow: loopback}); err != nil {
				t.Fatal(err)
			}
		}
		past := time.Now().Add(-time.Second)
		if _, err := q.ScheduleBatch(ctx, []queue.NewTimer{{ID: "f", Due: past, Endpoint: "flaky"}, {ID: "o", Due: past, Endpoint: "other"}}); err != nil {
			t.Fatal(err)
		}
		for fired := 0; fired < 2; {
			res, err := q.Engine().Claim(ctx, 10)
			if err != nil || len(res.Fired) == 0 {
				t.Fatalf("claim: %+v %v", res, err)
			}
			fired += len(res.Fired)
		}
		d := &dispatch.Dispatcher{Queue: q, Consumer: "d1", Sender: newSender(t, &deliver.Guard{Allow: loopback})}
		startDispatcher(t, d)
		redistest.Eventually(t, 10*time.Second, "both fires are dead-lettered (410)", func() bool {
			page, err := q.Deliveries().DeadLetters(ctx, queue.DeadLetterListOptions{Limit: 10})
			dls := page.DeadLetters
			return err == nil && len(dls) == 2
		})
		if all, err := dispatch.Redrive(ctx, q, "", "", true); err != nil || len(all) != 2 {
			t.Fatalf("dry run of every endpoint: %v %v", all, err)
		}
		fixed.Store(true)
		r, err := dispatch.Redrive(ctx, q, "", "flaky", false)
		if err != nil || len(r) != 1 || r[0].Event.ID != "f" || r[0].NewStreamID == "" {
			t.Fatalf("Redrive(flaky): %+v %v", r, err)
		}
		redistest.Eventually(t, 10*time.Second, "the redriven fire is delivered", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(got) == 3
		})
		mu.Lock()
		first, again := got[0], got[2]
		if got[1].Get(deliver.HeaderTimerID) == "f" {
			first = got[1]
		}
		mu.Unlock()
		if again.Get(deliver.HeaderTimerID) != "f" || again.Get(deliver.HeaderAttempt) != "1" ||
			again.Get(deliver.HeaderID) != first.Get(deliver.HeaderID) {
			t.Errorf("redriven request: timer %s attempt %s id %s; want f, 1, %s", again.Get(deliver.HeaderTimerID),
				again.Get(deliver.HeaderAttempt), again.Get(deliver.HeaderID), first.Get(deliver.HeaderID))
		}
		page, err := q.Deliveries().DeadLetters(ctx, queue.DeadLetterListOptions{Limit: 10})
		dls := page.DeadLetters
		if err != nil || len(dls) != 1 || dls[0].Event.ID != "o" {
			t.Errorf("dead letters after the redrive: %+v %v; want only o's", dls, err)
		}
		if n, err := dispatch.Redrive(ctx, q, "", "flaky", false); err != nil || len(n) != 0 {
			t.Errorf("a second redrive: %v %v, want nothing", n, err)
		}
	})
}
