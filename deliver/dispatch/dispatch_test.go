package dispatch_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/timerq/timerq/deliver"
	"github.com/timerq/timerq/deliver/dispatch"
	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/queue"
)

// TestMain runs up to 6 parallel tests at once unless -parallel says
// otherwise: they wait on receivers, backoffs and leases rather than
// compute, and two at a time took half the package's time (issue 36).
func TestMain(m *testing.M) {
	redistest.DefaultParallel(6)
	goleak.VerifyTestMain(redistest.Shared(m))
}

var loopback = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}

// sink is a local endpoint that counts the requests it gets and answers
// with h (204 if nil).
type sink struct {
	*httptest.Server
	hits atomic.Int64
}

// newBlockedSink is a sink whose requests wait until release is called
// (or the client gives up), then succeed; release may be called more than
// once.
func newBlockedSink(t *testing.T) (s *sink, release func()) {
	t.Helper()
	unblock := make(chan struct{})
	var once sync.Once
	release = func() { once.Do(func() { close(unblock) }) }
	s = newSink(t, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body) // the server notices a closed connection only once the body is read
		select {
		case <-unblock:
			w.WriteHeader(http.StatusNoContent)
		case <-r.Context().Done():
		}
	})
	return s, release
}

func newSink(t *testing.T, h http.HandlerFunc) *sink {
	t.Helper()
	s := &sink{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		if h != nil {
			h(w, r)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(s.Close)
	return s
}

// newQueue opens a queue on a namespace of the test's own, with b's
// shards on a Cluster backend, closed when the test ends.
func newQueue(t *testing.T, b *redistest.Backend) *queue.Queue {
	t.Helper()
	ns := redistest.Namespace(t)
	if b.Shards > 0 {
		if _, err := queue.CreateNamespace(context.Background(), b.Client, ns, b.Shards); err != nil {
			t.Fatal(err)
		}
	}
	q, err := queue.New(b.Client, queue.Options{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Close() })
	return q
}

// startDispatcher runs d until the returned stop is called, or the test
// ends: stop cancels Run, waits for it to return and checks it returned
// nil. Stopping twice is stopping once.
func startDispatcher(t *testing.T, d *dispatch.Dispatcher) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// recordReports is an OnAttempt that appends each report to reports under
// its timer's ID, holding mu, which the test holds to read them; and feeds
// m, when not nil, as a worker's metrics would be fed.
func recordReports(mu *sync.Mutex, reports map[string][]dispatch.Report, m *dispatch.Metrics) func(dispatch.Report) {
	return func(r dispatch.Report) {
		if m != nil {
			m.Observe(r)
		}
		mu.Lock()
		defer mu.Unlock()
		reports[r.Event.ID] = append(reports[r.Event.ID], r)
	}
}

func newSender(t *testing.T, g *deliver.Guard) *deliver.Sender {
	s := &deliver.Sender{Guard: g}
	t.Cleanup(s.CloseIdleConnections)
	return s
}

// fireAll schedules timers due in the past and fires them all.
func fireAll(t *testing.T, q *queue.Queue, ids []string) {
	t.Helper()
	var batch []queue.NewTimer
	for _, id := range ids {
		batch = append(batch, queue.NewTimer{ID: id, Due: time.Now().Add(-time.Second), Payload: []byte(`{"id":"` + id + `"}`)})
	}
	if _, err := q.ScheduleBatch(context.Background(), batch); err != nil {
		t.Fatal(err)
	}
	fired := 0
	for fired < len(ids) {
		res, err := q.Engine().Claim(context.Background(), queue.MaxBatch)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Fired) == 0 {
			t.Fatalf("fired %d of %d timers due in the past", fired, len(ids))
		}
		fired += len(res.Fired)
	}
}

func names(prefix string, n int) []string {
	var out []string
	for i := range n {
		out = append(out, fmt.Sprintf("%s/%d", prefix, i))
	}
	return out
}

// The dispatcher delivers each fire to the endpoint its route names, and
// settles it by the policy: a fast endpoint gets all its fires while a
// slow one holds every slot it has (one slow endpoint does not delay the
// others), an endpoint that always answers 500 has its fires
// dead-lettered after the policy's attempts, 410 and a missing endpoint
// dead-letter at once, a fire that delivers nowhere is acknowledged, and
// once the slow endpoint answers, its fires arrive too.
func TestDispatcherDeliversAndSettles(t *testing.T) {
	t.Parallel() // each arm its own namespace, receiver and dispatcher
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		q := newQueue(t, b)
		fast := newSink(t, nil)
		unblock := make(chan struct{})
		slow := newSink(t, func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body)
			select {
			case <-unblock:
			case <-r.Context().Done():
			}
		})
		failing := newSink(t, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(500) })
		gone := newSink(t, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(410) })
		quick := deliver.Policy{MaxAttempts: 3, Base: time.Millisecond, Cap: 5 * time.Millisecond}
		endpoints := map[string]deliver.Endpoint{
			"fast":    {URL: fast.URL, Policy: quick, MaxInFlight: 4},
			"slow":    {URL: slow.URL, Policy: quick, MaxInFlight: 2, Timeout: time.Minute},
			"failing": {URL: failing.URL, Policy: quick},
			"gone":    {URL: gone.URL, Policy: quick},
		}
		var mu sync.Mutex
		reports := map[string][]dispatch.Report{}
		d := &dispatch.Dispatcher{
			Queue:    q,
			Consumer: "d1",
			Sender:   newSender(t, &deliver.Guard{Allow: loopback}),
			Route: func(ev queue.Event) string {
				name, _, _ := strings.Cut(ev.ID, "/")
				if name == "none" {
					return "" // a timer that delivers nowhere
				}
				return name
			},
			Lookup: func(_ context.Context, name string) (deliver.Endpoint, error) {
				ep, ok := endpoints[name]
				if !ok {
					return ep, fmt.Errorf("%w: %q", dispatch.ErrNoEndpoint, name)
				}
				return ep, nil
			},
			Backlog:   1,
			OnAttempt: recordReports(&mu, reports, nil),
			OnError:   func(err error) { t.Errorf("dispatcher: %v", err) },
		}
		// The slow endpoint's fires go first, so they hold its slots
		// and backlog before the fast ones are leased.
		fireAll(t, q, names("slow", 6))
		fireAll(t, q, append(append(append(append(names("fast", 40), names("failing", 3)...), "gone/0"), "missing/0"), "none/0"))

		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- d.Run(ctx) }()
		stopped := false
		stop := func() {
			if !stopped {
				stopped = true
				cancel()
				if err := <-done; err != nil {
					t.Errorf("Run: %v", err)
				}
			}
		}
		defer stop()

		redistest.Eventually(t, 30*time.Second, "every fast fire delivered", func() bool { return fast.hits.Load() >= 40 })
		if n := slow.hits.Load(); n > 2 {
			t.Fatalf("the slow endpoint (2 in flight) has %d requests under way", n)
		}
		redistest.Eventually(t, 30*time.Second, "5 dead letters", func() bool {
			page, err := q.Deliveries().DeadLetters(context.Background(), queue.DeadLetterListOptions{Limit: 100})
			dl := page.DeadLetters
			return err == nil && len(dl) >= 5
		})
		page, err := q.Deliveries().DeadLetters(context.Background(), queue.DeadLetterListOptions{Limit: 100})
		dls := page.DeadLetters
		if err != nil {
			t.Fatal(err)
		}
		why := map[string]string{}
		for _, dl := range dls {
			why[dl.Event.ID] = dl.Error
		}
		for id, want := range map[string]string{
			"failing/0": "exhausted after server_error: HTTP 500",
			"failing/2": "exhausted after server_error: HTTP 500",
			"gone/0":    "gone: HTTP 410",
			"missing/0": "no such endpoint",
		} {
			if !strings.Contains(why[id], want) {
				t.Errorf("dead letter %s: %q, want it to say %q (all: %v)", id, why[id], want, why)
			}
		}
		if len(dls) != 5 {
			t.Errorf("%d dead letters, want 5: %v", len(dls), why)
		}
		if n := failing.hits.Load(); n != 9 {
			t.Errorf("the failing endpoint got %d requests, want 3 fires × 3 attempts", n)
		}
		// OnAttempt reports an attempt after settling it (Report.SettleErr),
		// so a dead letter is visible before its last attempt is reported.
		redistest.Eventually(t, 30*time.Second, "the failing endpoint's 9 attempts reported", func() bool {
			mu.Lock()
			defer mu.Unlock()
			n := 0
			for _, id := range names("failing", 3) {
				n += len(reports[id])
			}
			return n >= 9
		})
		mu.Lock()
		if rs := reports["failing/1"]; len(rs) != 3 || rs[0].Attempt.Outcome != deliver.Retry || rs[2].Attempt.Outcome != deliver.DeadLetter {
			t.Errorf("attempts of failing/1: %+v", rs)
		}
		if _, ok := reports["none/0"]; ok {
			t.Error("a fire that delivers nowhere was attempted")
		}
		mu.Unlock()

		close(unblock)
		redistest.Eventually(t, 30*time.Second, "every slow fire delivered", func() bool {
			mu.Lock()
			defer mu.Unlock()
			for _, id := range names("slow", 6) {
				rs := reports[id]
				if len(rs) == 0 || rs[len(rs)-1].Attempt.Outcome != deliver.Delivered {
					return false
				}
			}
			return true
		})
		stop()
		if n := fast.hits.Load(); n != 40 {
			t.Errorf("the fast endpoint got %d requests for 40 fires", n)
		}
	})
}

// A dispatcher that stops hands back the fires it holds, under way or
// waiting for their endpoint, so that another dispatcher of the group
// delivers them at once rather than after their leases (a minute) run out.
func TestDispatcherStopHandsFiresBack(t *testing.T) {
	t.Parallel() // each arm its own namespace, receiver and dispatcher
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		q := newQueue(t, b)
		stuck := newSink(t, func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body) // the server notices a closed connection only once the body is read
			<-r.Context().Done()
		})
		fast := newSink(t, nil)
		var mu sync.Mutex
		delivered := map[string]string{} // timer ID → consumer
		run := func(consumer, url string) (stop func()) {
			d := &dispatch.Dispatcher{
				Queue: q, Consumer: consumer, Sender: newSender(t, &deliver.Guard{Allow: loopback}),
				Route: func(queue.Event) string { return "e" },
				Lookup: func(context.Context, string) (deliver.Endpoint, error) {
					return deliver.Endpoint{URL: url, MaxInFlight: 2, Timeout: time.Minute}, nil
				},
				OnAttempt: func(r dispatch.Report) {
					if r.Attempt.Outcome == deliver.Delivered {
						mu.Lock()
						delivered[r.Event.ID] = consumer
						mu.Unlock()
					}
				},
				OnError: func(err error) { t.Errorf("%s: %v", consumer, err) },
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- d.Run(ctx) }()
			return func() {
				cancel()
				if err := <-done; err != nil {
					t.Errorf("%s: Run: %v", consumer, err)
				}
			}
		}
		ids := names("t", 6)
		fireAll(t, q, ids)
		stop1 := run("d1", stuck.URL)
		// d1 holds all six: two attempts under way, the rest in its
		// backlog (2 slots × 4).
		redistest.Eventually(t, 30*time.Second, "d1's two attempts under way", func() bool { return stuck.hits.Load() == 2 })
		stop1()
		stop2 := run("d2", fast.URL)
		defer stop2()
		redistest.Eventually(t, 20*time.Second, "d2 delivering all six", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(delivered) == len(ids)
		})
		mu.Lock()
		defer mu.Unlock()
		for _, id := range ids {
			if delivered[id] != "d2" {
				t.Errorf("%s delivered by %q, want d2", id, delivered[id])
			}
		}
	})
}

// A dispatcher leases no more than its endpoints have room for: with one
// endpoint that holds 40 fires (8 in flight, a backlog of 4 × 8) and 300
// fires waiting, none is leased only to be released as busy and leased
// again (each is delivered as the group's first delivery), and all arrive,
// once each, acknowledged with their attempt logs.
//
// The dispatcher waits for room without the 5 ms limit (busyPause): with
// it, a stall of every attempt under way longer than that (a loaded
// machine under -race) makes it lease one fire anyway, by design, which is
// released as busy if the endpoint is still full; that half is
// TestDispatcherLeasesPastAFullEndpoint's.
func TestDispatcherLeasesWhatItsEndpointsTake(t *testing.T) {
	t.Parallel() // each arm its own namespace, receiver and dispatcher
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		q := newQueue(t, b)
		n := 300
		if b.Mini != nil {
			n = 100 // Lua in Go under -race
		}
		s := newSink(t, nil)
		var mu sync.Mutex
		again := map[string]string{} // fires delivered to the group more than once
		failed := map[string]bool{}  // fires with a failed attempt: released to retry, no busy release
		done := 0
		d := &dispatch.Dispatcher{
			Queue: q, Consumer: "d", Sender: newSender(t, &deliver.Guard{Allow: loopback}),
			Route: func(queue.Event) string { return "e" },
			Lookup: func(context.Context, string) (deliver.Endpoint, error) {
				return deliver.Endpoint{URL: s.URL, MaxInFlight: 8}, nil
			},
			OnAttempt: func(r dispatch.Report) {
				mu.Lock()
				defer mu.Unlock()
				if r.Event.Attempt != 1 {
					again[r.Event.ID] = fmt.Sprintf("delivery %d, attempt %d, %v", r.Event.Attempt, r.Number, r.Attempt.Outcome)
				}
				if r.Attempt.Outcome != deliver.Delivered || r.Stopped {
					failed[r.Event.ID] = true
				}
				if r.Attempt.Outcome == deliver.Delivered && r.SettleErr == nil {
					done++
				}
			},
			OnError: func(err error) { t.Errorf("dispatcher: %v", err) },
		}
		dispatch.SetBusyWait(d, time.Hour)
		ids := names("t", n)
		fireAll(t, q, ids)
		ctx, cancel := context.WithCancel(context.Background())
		stopped := make(chan error, 1)
		go func() { stopped <- d.Run(ctx) }()
		redistest.Eventually(t, 60*time.Second, "every fire delivered and acknowledged", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return done == n
		})
		cancel()
		if err := <-stopped; err != nil {
			t.Fatal(err)
		}
		for id, what := range again {
			if !failed[id] {
				t.Errorf("%s was leased again (%s) though no attempt of it failed: released as busy first", id, what)
			}
		}
		if h := s.hits.Load(); h != int64(n) {
			t.Errorf("the endpoint got %d requests for %d fires", h, n)
		}
		if p, err := b.Client.XPending(context.Background(), q.Keys().Stream(0), dispatch.DefaultGroup).Result(); err != nil || p.Count != 0 {
			t.Errorf("pending after every acknowledgement: %+v, %v", p, err)
		}
		log, err := q.Deliveries().Attempts(context.Background(), ids[n-1])
		if err != nil || len(log) != 1 || log[0].Outcome != "delivered" {
			t.Errorf("attempt log of %s: %+v, %v", ids[n-1], log, err)
		}
	})
}

// A dispatcher whose one endpoint is full and makes no progress still
// leases, one fire at a time after its short wait for room, so that a
// fire of another endpoint behind the full one's in the stream is
// delivered at once. The full endpoint's fires it leases meanwhile, past
// what its backlog holds even beyond room (TestDispatcherHoldsAFireLeasedPastAFullEndpoint),
// are released as busy, untried: each is later delivered once, as its
// first attempt, though leased more than once.
func TestDispatcherLeasesPastAFullEndpoint(t *testing.T) {
	t.Parallel() // each arm its own namespace, receiver and dispatcher
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		q := newQueue(t, b)
		full, release := newBlockedSink(t)
		defer release()
		other := newSink(t, nil)
		var mu sync.Mutex
		reports := map[string][]dispatch.Report{}
		d := &dispatch.Dispatcher{
			Queue: q, Consumer: "d", Sender: newSender(t, &deliver.Guard{Allow: loopback}),
			Route: func(ev queue.Event) string { return strings.Split(ev.ID, "/")[0] },
			Lookup: func(_ context.Context, name string) (deliver.Endpoint, error) {
				if name == "full" {
					// One in flight and a backlog of 4: it holds 5 fires.
					return deliver.Endpoint{URL: full.URL, MaxInFlight: 1, Timeout: time.Minute}, nil
				}
				return deliver.Endpoint{URL: other.URL, MaxInFlight: 1}, nil
			},
			OnAttempt: recordReports(&mu, reports, nil),
			OnError:   func(err error) { t.Errorf("dispatcher: %v", err) },
		}
		// More of the full endpoint's fires than a first lease takes (32),
		// so that the other's fire is reached only by leasing past them.
		fulls := names("full", 36)
		fireAll(t, q, fulls)
		fireAll(t, q, []string{"other/0"})
		ctx, cancel := context.WithCancel(context.Background())
		stopped := make(chan error, 1)
		go func() { stopped <- d.Run(ctx) }()
		stop := func() {
			if cancel != nil {
				cancel()
				cancel = nil
				if err := <-stopped; err != nil {
					t.Errorf("Run: %v", err)
				}
			}
		}
		defer stop()
		redistest.Eventually(t, 30*time.Second, "the other endpoint's fire delivered while the full one is stuck", func() bool {
			return other.hits.Load() == 1
		})
		if h := full.hits.Load(); h != 1 {
			t.Errorf("the full endpoint (1 in flight) got %d requests while stuck", h)
		}
		release()
		redistest.Eventually(t, 60*time.Second, "every fire of the full endpoint delivered", func() bool {
			mu.Lock()
			defer mu.Unlock()
			for _, id := range fulls {
				if len(reports[id]) == 0 {
					return false
				}
			}
			return true
		})
		stop()
		if h := full.hits.Load(); h != int64(len(fulls)) {
			t.Errorf("the full endpoint got %d requests for %d fires", h, len(fulls))
		}
		mu.Lock()
		defer mu.Unlock()
		releasedBusy := 0
		for _, id := range fulls {
			rs := reports[id]
			if len(rs) != 1 || rs[0].Attempt.Outcome != deliver.Delivered || rs[0].Number != 1 {
				var got []string
				for _, r := range rs {
					got = append(got, fmt.Sprintf("attempt %d %v", r.Number, r.Attempt.Outcome))
				}
				t.Errorf("%s: %v; want one attempt, numbered 1, delivered", id, got)
				continue
			}
			if rs[0].Event.Attempt > 1 {
				releasedBusy++
			}
		}
		// The first lease takes 32, of which the endpoint holds 6: 5
		// within its room and one past it.
		if releasedBusy < 32-6 {
			t.Errorf("%d fires delivered after a busy release, want at least 26", releasedBusy)
		}
	})
}

// A fire leased while its endpoint is full (the one fire a dispatcher
// leases past a full endpoint) waits in the dispatcher and is sent as soon
// as a slot frees, not released as busy to come back BusyDelay later: it
// is leased once, and delivered as its first delivery to the group.
func TestDispatcherHoldsAFireLeasedPastAFullEndpoint(t *testing.T) {
	t.Parallel() // each arm its own namespace, receiver and dispatcher
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		q := newQueue(t, b)
		s, release := newBlockedSink(t)
		defer release()
		var mu sync.Mutex
		reports := map[string][]dispatch.Report{}
		d := &dispatch.Dispatcher{
			Queue: q, Consumer: "d", Sender: newSender(t, &deliver.Guard{Allow: loopback}),
			Route: func(queue.Event) string { return "e" },
			Lookup: func(context.Context, string) (deliver.Endpoint, error) {
				// One in flight and a backlog of 4: room for 5 fires.
				return deliver.Endpoint{URL: s.URL, MaxInFlight: 1, Timeout: time.Minute}, nil
			},
			OnAttempt: recordReports(&mu, reports, nil),
			OnError:   func(err error) { t.Errorf("dispatcher: %v", err) },
		}
		ids := names("t", 6)
		fireAll(t, q, ids[:5])
		ctx, cancel := context.WithCancel(context.Background())
		stopped := make(chan error, 1)
		go func() { stopped <- d.Run(ctx) }()
		stop := func() {
			if cancel != nil {
				cancel()
				cancel = nil
				if err := <-stopped; err != nil {
					t.Errorf("Run: %v", err)
				}
			}
		}
		defer stop()
		redistest.Eventually(t, 30*time.Second, "the endpoint full: one attempt under way, four fires waiting", func() bool {
			return s.hits.Load() == 1 && d.Held() == 5
		})
		// With no room, the dispatcher leases one fire at a time: this one.
		fireAll(t, q, ids[5:])
		redistest.Eventually(t, 30*time.Second, "the sixth fire, leased past the full endpoint, held rather than released as busy", func() bool {
			return d.Held() == 6
		})
		release()
		redistest.Eventually(t, 60*time.Second, "every fire delivered", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(reports) == len(ids)
		})
		stop()
		mu.Lock()
		defer mu.Unlock()
		for _, id := range ids {
			rs := reports[id]
			if len(rs) != 1 || rs[0].Attempt.Outcome != deliver.Delivered || rs[0].Number != 1 || rs[0].Event.Attempt != 1 {
				var got []string
				for _, r := range rs {
					got = append(got, fmt.Sprintf("delivery %d, attempt %d, %v", r.Event.Attempt, r.Number, r.Attempt.Outcome))
				}
				t.Errorf("%s: %v; want one attempt, delivered, on its first delivery (never released as busy)", id, got)
			}
		}
		if h := s.hits.Load(); h != int64(len(ids)) {
			t.Errorf("the endpoint got %d requests for %d fires", h, len(ids))
		}
	})
}

func TestDispatcherRefusesBadConfig(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never reached: Run refuses first
	t.Cleanup(func() { rdb.Close() })
	q, err := queue.New(rdb, queue.Options{Namespace: "n"})
	if err != nil {
		t.Fatal(err)
	}
	route := func(queue.Event) string { return "" }
	lookup := func(context.Context, string) (deliver.Endpoint, error) { return deliver.Endpoint{}, nil }
	for name, d := range map[string]*dispatch.Dispatcher{
		"no queue":     {Route: route, Lookup: lookup},
		"short lease":  {Queue: q, Route: route, Lookup: lookup, Lease: time.Millisecond},
		"bad group":    {Queue: q, Route: route, Lookup: lookup, Group: "a b"},
		"bad consumer": {Queue: q, Route: route, Lookup: lookup, Consumer: strings.Repeat("c", 200)},
	} {
		// A Run that accepted the configuration would run until the
		// deadline and return nil.
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		err := d.Run(ctx)
		cancel()
		if !errors.Is(err, queue.ErrInvalidOptions) {
			t.Errorf("%s: Run = %v, want ErrInvalidOptions", name, err)
		}
	}
}
