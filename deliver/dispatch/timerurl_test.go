package dispatch_test

import (
	"context"
	"io"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/timerq/timerq/deliver"
	"github.com/timerq/timerq/deliver/dispatch"
	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/queue"
)

// A timer with a URL of its own is delivered there, signed with its
// endpoint's secret, while a timer without one goes to the endpoint's URL.
// With the namespace's policy turned off, a dispatcher dead-letters such a
// fire, saying why, without a request; redriven once the policy is on, it
// is delivered. The SSRF guard judges the timer's URL at dial time: an
// address admitted at scheduling (127.0.0.0/8) but not by the dispatcher's
// guard (127.0.0.1 only) is refused and dead-lettered.
func TestDispatcherDeliversToTimerURLs(t *testing.T) {
	t.Parallel() // each arm its own namespace, receiver and dispatcher
	redistest.ForEachAll(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		ns := redistest.Namespace(t)
		if b.Shards > 1 {
			if _, err := queue.CreateNamespace(ctx, b.Client, ns, b.Shards); err != nil {
				t.Fatal(err)
			}
		}
		q, err := queue.New(b.Client, queue.Options{Namespace: ns, TimerURLAllow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}})
		if err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		got := map[string]*http.Request{} // timer ID -> request
		bodies := map[string][]byte{}
		sink := newSink(t, func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			mu.Lock()
			id := r.Header.Get(deliver.HeaderTimerID)
			got[id], bodies[id] = r.Clone(context.Background()), body
			mu.Unlock()
			w.WriteHeader(http.StatusNoContent)
		})
		received := func(id string) (*http.Request, []byte) {
			mu.Lock()
			defer mu.Unlock()
			return got[id], bodies[id]
		}
		sec := testSecret()
		if _, err := q.Endpoints().Put(ctx, queue.Endpoint{Name: "e", URL: sink.URL + "/endpoint", Secrets: []queue.Secret{sec}},
			&queue.PutEndpointOptions{Allow: loopback}); err != nil {
			t.Fatal(err)
		}
		if err := q.Deliveries().SetPolicy(ctx, queue.DeliveryPolicy{AllowTimerURLs: true}); err != nil {
			t.Fatal(err)
		}
		port := sink.URL[strings.LastIndex(sink.URL, ":"):]
		past := time.Now().Add(-time.Second)
		if _, err := q.ScheduleBatch(ctx, []queue.NewTimer{
			{ID: "own", Due: past, Endpoint: "e", URL: sink.URL + "/own?tenant=7", Payload: []byte(`{"own":1}`)},
			{ID: "plain", Due: past, Endpoint: "e", Payload: []byte(`{}`)},
			{ID: "later", Due: past, Endpoint: "e", URL: sink.URL + "/later"},
			{ID: "guarded", Due: past, Endpoint: "e", URL: "http://127.0.0.2" + port + "/guarded"},
		}); err != nil {
			t.Fatal(err)
		}
		claimAll := func(n int) {
			for fired := 0; fired < n; {
				res, err := q.Engine().Claim(ctx, 10)
				if err != nil || len(res.Fired) == 0 {
					t.Fatalf("claim: %+v %v (fired %d of %d)", res, err, fired, n)
				}
				fired += len(res.Fired)
			}
		}
		claimAll(4)
		// Scheduled while allowed, turned off before any dispatcher reads
		// the fires.
		if err := q.Deliveries().SetPolicy(ctx, queue.DeliveryPolicy{}); err != nil {
			t.Fatal(err)
		}
		run := func() (stop func()) {
			runCtx, cancel := context.WithCancel(ctx)
			done := make(chan error, 1)
			d := &dispatch.Dispatcher{Queue: q, Consumer: "d1", Sender: newSender(t, &deliver.Guard{Allow: loopback})}
			go func() { done <- d.Run(runCtx) }()
			return func() {
				cancel()
				if err := <-done; err != nil {
					t.Error(err)
				}
			}
		}
		stop := run()
		deadLetters := func() map[string]string {
			page, err := q.Deliveries().DeadLetters(ctx, queue.DeadLetterListOptions{Limit: 10})
			dls := page.DeadLetters
			if err != nil {
				t.Fatal(err)
			}
			out := map[string]string{}
			for _, d := range dls {
				out[d.Event.ID] = d.Error
			}
			return out
		}
		redistest.Eventually(t, 15*time.Second, "the plain fire delivered, the three with URLs dead-lettered", func() bool {
			r, _ := received("plain")
			return r != nil && len(deadLetters()) == 3
		})
		stop()
		dls := deadLetters()
		for _, id := range []string{"own", "later", "guarded"} {
			if !strings.Contains(dls[id], "timer URLs are not allowed") {
				t.Errorf("dead letter of %s: %q; want it to say timer URLs are not allowed", id, dls[id])
			}
			if r, _ := received(id); r != nil {
				t.Errorf("%s was delivered to %s while the policy was off", id, r.URL)
			}
		}
		if r, _ := received("plain"); r.URL.Path != "/endpoint" {
			t.Errorf("the plain timer went to %s, want the endpoint's URL", r.URL)
		}

		// The policy on again, the dead letters redriven.
		if err := q.Deliveries().SetPolicy(ctx, queue.DeliveryPolicy{AllowTimerURLs: true}); err != nil {
			t.Fatal(err)
		}
		if r, err := dispatch.Redrive(ctx, q, "", "e", false); err != nil || len(r) != 3 {
			t.Fatalf("Redrive: %v %v", r, err)
		}
		stop = run()
		defer stop()
		redistest.Eventually(t, 15*time.Second, "own and later delivered, guarded refused", func() bool {
			r1, _ := received("own")
			r2, _ := received("later")
			return r1 != nil && r2 != nil && strings.Contains(deadLetters()["guarded"], "refused")
		})
		key, _ := deliver.ParseSecret(sec.Reveal())
		r, body := received("own")
		if r.URL.Path != "/own" || r.URL.RawQuery != "tenant=7" || string(body) != `{"own":1}` {
			t.Errorf("own: %s %s, want /own?tenant=7 with its payload", r.URL, body)
		}
		if err := deliver.Verify(r.Header, body, time.Now(), key); err != nil {
			t.Errorf("own: the endpoint's secret does not verify the signature: %v", err)
		}
		if r, _ := received("later"); r.URL.Path != "/later" {
			t.Errorf("later went to %s", r.URL)
		}
		if r, _ := received("guarded"); r != nil {
			t.Error("the guard let a delivery reach 127.0.0.2")
		}
		if len(deadLetters()) != 1 {
			t.Errorf("dead letters %v; want only guarded's", deadLetters())
		}
	})
}
