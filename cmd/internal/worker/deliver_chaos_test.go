package worker

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/timerq/timerq/cmd/internal/apiserver"
	"github.com/timerq/timerq/cmd/internal/cliconf"
	"github.com/timerq/timerq/deliver"
	"github.com/timerq/timerq/deliver/dispatch"
	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/queue"
)

// hit is one request a chaos receiver got, whatever it answered.
type hit struct {
	timer, path, webhookID string
	attempt                string
	due, at                time.Time
	status                 int // 0: the connection was cut
}

// chaosSink records every request and answers it with answer (a status,
// or 0 to cut the connection without an answer).
type chaosSink struct {
	*httptest.Server
	mu   sync.Mutex
	hits []hit
}

func newChaosSink(t *testing.T, answer func(r *http.Request) int) *chaosSink {
	t.Helper()
	s := &chaosSink{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		at := time.Now()
		io.Copy(io.Discard, r.Body)
		h := hit{timer: r.Header.Get(deliver.HeaderTimerID), path: r.URL.Path, webhookID: r.Header.Get(deliver.HeaderID),
			attempt: r.Header.Get(deliver.HeaderAttempt), at: at}
		h.due, _ = time.Parse(time.RFC3339Nano, r.Header.Get(deliver.HeaderDueAt))
		h.status = answer(r)
		s.mu.Lock()
		s.hits = append(s.hits, h)
		s.mu.Unlock()
		if h.status == 0 {
			if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
				conn.Close() // down: no answer at all
			}
			return
		}
		w.WriteHeader(h.status)
	}))
	t.Cleanup(s.Close)
	return s
}

// of returns the requests for timer id ("" for all).
func (s *chaosSink) of(id string) []hit {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []hit
	for _, h := range s.hits {
		if id == "" || h.timer == id {
			out = append(out, h)
		}
	}
	return out
}

// delivered reports whether timer id got a 2xx answer.
func (s *chaosSink) delivered(id string) bool {
	for _, h := range s.of(id) {
		if h.status >= 200 && h.status < 300 {
			return true
		}
	}
	return false
}

// deliverWorker runs a worker that claims and delivers ns (timerworker
// --deliver --deliver-allow 127.0.0.1/32 --api-addr 127.0.0.1:0), and
// returns it with a queue of ns.
func deliverWorker(t *testing.T, b *redistest.Backend, ns string) (*running, *queue.Queue) {
	t.Helper()
	cfg := Config{Conn: cliconf.Conn{RedisURL: redisURL(b)}, Namespaces: []string{ns}, MaxPollInterval: 20 * time.Millisecond,
		API:     apiserver.Config{Addr: "127.0.0.1:0"},
		Deliver: DeliverConfig{Enabled: true, Allow: []string{"127.0.0.1/32"}}}
	w := runWorker(t, cfg)
	q, err := queue.New(b.Client, queue.Options{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Close() })
	return w, q
}

// scheduleOver schedules n timers named prefix-i over the API, due from
// first on, step apart, delivering to endpoint.
func scheduleOver(t *testing.T, base, prefix, endpoint string, n int, first, step time.Duration) []string {
	t.Helper()
	var ids []string
	var timers []map[string]any
	for i := range n {
		id := fmt.Sprintf("%s-%d", prefix, i)
		ids = append(ids, id)
		timers = append(timers, map[string]any{"id": id, "in": (first + time.Duration(i)*step).String(),
			"payload_text": fmt.Sprintf(`{"n":%d}`, i), "deliver": map[string]any{"endpoint": endpoint}})
	}
	send(t, "POST", base+"/timers/batch", map[string]any{"timers": timers})
	return ids
}

// neverEarly fails the test for any request received before its due time
// (the receiver and Redis share this host's clock), or without one.
func neverEarly(t *testing.T, hits []hit) {
	t.Helper()
	for _, h := range hits {
		if h.due.IsZero() || h.at.Before(h.due) {
			t.Errorf("%s attempt %s received at %v, due %v: early", h.timer, h.attempt, h.at.Format(time.StampMilli), h.due.Format(time.StampMilli))
		}
	}
}

// skipShort skips a test whose subject is wall time (what is waited is
// the behaviour under test) in the fast loop, -short.
func skipShort(t *testing.T, waits string) {
	t.Helper()
	if testing.Short() {
		t.Skipf("-short skips tests that wait on real time (this one: %s); drop -short to run it", waits)
	}
}

// An endpoint down (every connection cut, no answer) for 20 s, then up:
// every fire arrives, none before its due time, nothing is dead-lettered,
// and each timer's attempt log shows the backoff of the policy: numbered
// attempts, each failed one a retry whose wait lies within the policy's
// ceiling min(cap, base·2^(n−1)), and the next attempt made once that
// wait has run and not much later. The backoff is shortened (base 100 ms,
// cap 2 s) so that the outage spans many attempts; the outage itself is
// 20 s of wall time, ten times the cap, so that the backoff grows to the
// cap and stays there.
func TestDeliverEndpointOutage(t *testing.T) {
	skipShort(t, "a 20 s endpoint outage")
	// Wall time it waits, not a core: beside the package's other
	// waits rather than after them (issue 36). Its workers, receivers
	// and namespaces are its own.
	t.Parallel()
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		ns := redistest.Namespace(t)
		var up atomic.Bool
		sink := newChaosSink(t, func(*http.Request) int {
			if up.Load() {
				return http.StatusNoContent
			}
			return 0
		})
		w, q := deliverWorker(t, b, ns)
		base := w.url + "/v1/namespaces/" + ns
		const (
			backoffBase = 100 * time.Millisecond
			backoffCap  = 2 * time.Second
		)
		send(t, "PUT", base+"/endpoints/down", map[string]any{
			"url": sink.URL + "/down", "secrets": []string{deliver.GenerateSecret()}, "timeout": "5s",
			"retry": map[string]any{"max_attempts": 1000, "max_age": "10m", "backoff_base": backoffBase.String(), "backoff_cap": backoffCap.String()},
		})
		n := 30
		if b.Mini != nil {
			n = 8 // Lua runs in a Go interpreter there
		}
		start := time.Now()
		ids := scheduleOver(t, base, "t", "down", n, 300*time.Millisecond, 100*time.Millisecond)
		redistest.Eventually(t, 30*time.Second, "a failed attempt of every timer", func() bool {
			for _, id := range ids {
				if len(sink.of(id)) == 0 {
					return false
				}
			}
			return true
		})
		// Wall time is what is under test: the outage lasts 20 s.
		time.Sleep(time.Until(start.Add(20 * time.Second)))
		up.Store(true)
		upAt := time.Now()
		redistest.Eventually(t, 30*time.Second, "every fire delivered once the endpoint is up", func() bool {
			for _, id := range ids {
				if !sink.delivered(id) {
					return false
				}
			}
			return true
		})
		neverEarly(t, sink.of(""))
		// Each arrives within the cap (and a lease poll) of the endpoint
		// coming back: the backoff stays bounded by the cap.
		for _, id := range ids {
			hs := sink.of(id)
			last := hs[len(hs)-1]
			if last.status != http.StatusNoContent || last.at.Sub(upAt) > backoffCap+2*time.Second {
				t.Errorf("%s: delivered %v after the endpoint came back (status %d); the cap is %v", id, last.at.Sub(upAt), last.status, backoffCap)
			}
		}
		total := 0
		redistest.Eventually(t, 10*time.Second, "every attempt log ends with the delivery", func() bool {
			for _, id := range ids {
				log, err := q.Deliveries().Attempts(ctx, id)
				if err != nil || len(log) == 0 || log[len(log)-1].Outcome != "delivered" {
					return false
				}
			}
			return true
		})
		for _, id := range ids {
			log, err := q.Deliveries().Attempts(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			tried := len(sink.of(id))
			total += tried
			// The log keeps the last 10 attempts of the fire.
			if last := log[len(log)-1]; last.Attempt != tried || last.Status != http.StatusNoContent {
				t.Errorf("%s: the log's last attempt is %+v; the receiver saw %d requests", id, last, tried)
			}
			if tried < 4 {
				t.Errorf("%s: %d attempts in a 20 s outage", id, tried)
			}
			for i, a := range log[:len(log)-1] {
				next := log[i+1]
				ceiling := min(backoffCap, backoffBase<<(a.Attempt-1))
				if a.Attempt > 20 {
					ceiling = backoffCap
				}
				switch {
				case a.Outcome != "retry" || a.Reason != "connection" || next.Attempt != a.Attempt+1:
					t.Errorf("%s attempt %d: %+v, then attempt %d; want numbered retries after connection errors", id, a.Attempt, a, next.Attempt)
				case a.RetryIn > ceiling:
					t.Errorf("%s attempt %d waited %v, above the policy's ceiling %v", id, a.Attempt, a.RetryIn, ceiling)
				}
				// Attempt times are kept to the millisecond; a release's
				// delay runs by the server's clock (one host here).
				gap := next.At.Sub(a.At.Add(a.Latency))
				if gap < a.RetryIn-50*time.Millisecond {
					t.Errorf("%s: attempt %d came %v after attempt %d ended, before its backoff of %v", id, next.Attempt, gap, a.Attempt, a.RetryIn)
				}
				// Not much later either: the fire comes back when its
				// release runs out, within a lease poll (1 s).
				if gap > a.RetryIn+2*time.Second {
					t.Errorf("%s: attempt %d came %v after attempt %d ended, long after its backoff of %v", id, next.Attempt, gap, a.Attempt, a.RetryIn)
				}
			}
		}
		t.Logf("%d timers, %d attempts during a %v outage (backoff base %v, cap %v)", len(ids), total, upAt.Sub(start).Round(time.Second), backoffBase, backoffCap)
		if page, err := q.Deliveries().DeadLetters(ctx, queue.DeadLetterListOptions{Limit: 100}); err != nil || len(page.DeadLetters) != 0 {
			t.Errorf("dead letters %+v (%v); nothing should be lost", page.DeadLetters, err)
		}
	})
}

// An endpoint that always answers 500: every fire is dead-lettered once,
// after the policy: exactly max_attempts attempts for an endpoint that
// limits attempts, and for one that limits age, several attempts, given
// up (expired) once the next would start past due + max_age; nothing is lost (every timer has exactly one dead letter, saying
// why) and each dead letter is redrivable: one through the API's requeue
// route, the rest by endpoint (timerctl redrive --endpoint), and once the
// endpoint answers each arrives with the webhook-id of its first attempt.
func TestDeliverAlwaysFailingEndpoint(t *testing.T) {
	skipShort(t, "retries until a 2 s max_age runs out")
	// Wall time it waits, not a core: beside the package's other
	// waits rather than after them (issue 36). Its workers, receivers
	// and namespaces are its own.
	t.Parallel()
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		ns := redistest.Namespace(t)
		var fixed atomic.Bool
		sink := newChaosSink(t, func(*http.Request) int {
			if fixed.Load() {
				return http.StatusNoContent
			}
			return http.StatusInternalServerError
		})
		w, q := deliverWorker(t, b, ns)
		base := w.url + "/v1/namespaces/" + ns
		const (
			maxAttempts = 4
			maxAge      = 2 * time.Second
			ageCap      = 200 * time.Millisecond
		)
		send(t, "PUT", base+"/endpoints/attempts", map[string]any{
			"url": sink.URL + "/attempts", "secrets": []string{deliver.GenerateSecret()},
			"retry": map[string]any{"max_attempts": maxAttempts, "backoff_base": "10ms", "backoff_cap": "50ms"},
		})
		send(t, "PUT", base+"/endpoints/aged", map[string]any{
			"url": sink.URL + "/aged", "secrets": []string{deliver.GenerateSecret()},
			"retry": map[string]any{"max_attempts": 1000, "max_age": maxAge.String(), "backoff_base": "50ms", "backoff_cap": ageCap.String()},
		})
		n := 10
		if b.Mini != nil {
			n = 4
		}
		byAttempts := scheduleOver(t, base, "a", "attempts", n, 300*time.Millisecond, 20*time.Millisecond)
		byAge := scheduleOver(t, base, "g", "aged", n, 300*time.Millisecond, 20*time.Millisecond)
		all := append(slices.Clone(byAttempts), byAge...)
		deadLetters := func() []queue.DeadLetter {
			page, err := q.Deliveries().DeadLetters(ctx, queue.DeadLetterListOptions{Limit: 1000})
			dls := page.DeadLetters
			if err != nil {
				t.Fatal(err)
			}
			return dls
		}
		// A dead letter and the entry its last attempt adds to the attempt
		// log are two writes (release.lua, then the log's RPUSH in the
		// same pipeline), so wait for both.
		logged := func() bool {
			for _, id := range byAttempts {
				if log, err := q.Deliveries().Attempts(ctx, id); err != nil || len(log) < maxAttempts {
					return false
				}
			}
			return true
		}
		redistest.Eventually(t, 60*time.Second, "every fire dead-lettered and logged", func() bool { return len(deadLetters()) >= len(all) && logged() })
		dls := deadLetters()
		seen := map[string]int{}
		for _, d := range dls {
			seen[d.Event.ID]++
			want := "exhausted after server_error: HTTP 500"
			if strings.HasPrefix(d.Event.ID, "g-") {
				want = "expired after server_error: HTTP 500"
			}
			if !strings.Contains(d.Error, want) || d.Group != dispatch.DefaultGroup {
				t.Errorf("dead letter of %s: group %q, %q; want the delivery group's, %s", d.Event.ID, d.Group, d.Error, want)
			}
		}
		for _, id := range all {
			if seen[id] != 1 {
				t.Errorf("%s has %d dead letters, want 1", id, seen[id])
			}
		}
		if len(dls) != len(all) {
			t.Errorf("%d dead letters for %d timers", len(dls), len(all))
		}
		neverEarly(t, sink.of(""))
		for _, id := range byAttempts {
			var got []string
			for _, h := range sink.of(id) {
				got = append(got, h.attempt)
			}
			if fmt.Sprint(got) != "[1 2 3 4]" {
				t.Errorf("%s: attempts %v, want [1 2 3 4] then the dead letter", id, got)
			}
			log, err := q.Deliveries().Attempts(ctx, id)
			if err != nil || len(log) != maxAttempts || log[maxAttempts-1].Outcome != "dead_letter" || log[maxAttempts-1].Reason != "exhausted" {
				t.Errorf("%s: attempt log %+v (%v); want %d attempts, the last dead-lettered as exhausted", id, log, err, maxAttempts)
			}
		}
		for _, id := range byAge {
			log, err := q.Deliveries().Attempts(ctx, id)
			if err != nil || len(log) == 0 {
				t.Fatalf("%s: attempt log %v (%v)", id, log, err)
			}
			hs := sink.of(id)
			last := log[len(log)-1]
			due := last.Due
			if last.Outcome != "dead_letter" || last.Reason != "expired" || last.Attempt != len(hs) || len(hs) < 3 {
				t.Errorf("%s: %d requests, last attempt %+v; want several, the last dead-lettered as expired", id, len(hs), last)
			}
			for _, h := range hs {
				// A retry starts when its release has run out and the
				// next lease poll (each second) takes it, so up to a
				// second after the backoff Decide planned within the
				// maximum age (docs/delivery.md, known limits).
				if h.at.After(due.Add(maxAge + ageCap + 1500*time.Millisecond)) {
					t.Errorf("%s: attempt %s at %v, past its due time %v + max age %v and a lease poll", id, h.attempt, h.at, due, maxAge)
				}
			}
			// Given up only when the next attempt could start past the
			// maximum age: its wait is at most the cap.
			if end := last.At.Add(last.Latency + ageCap); end.Before(due.Add(maxAge - 100*time.Millisecond)) {
				t.Errorf("%s: dead-lettered at %v, though a retry within the cap (%v) was within due %v + max age %v", id, last.At, ageCap, due, maxAge)
			}
		}

		// Redrive: the endpoint answers again; one dead letter through
		// the API, the rest by endpoint.
		fixed.Store(true)
		var page struct {
			DeadLetters []struct {
				DeadLetterID string `json:"dead_letter_id"`
				ID           string `json:"id"`
			} `json:"dead_letters"`
		}
		if err := json.Unmarshal(send(t, "GET", base+"/groups/"+dispatch.DefaultGroup+"/dead-letters?limit=1000", nil), &page); err != nil {
			t.Fatal(err)
		}
		if len(page.DeadLetters) != len(all) {
			t.Fatalf("the API lists %d dead letters, want %d", len(page.DeadLetters), len(all))
		}
		one := page.DeadLetters[0]
		send(t, "POST", base+"/groups/"+dispatch.DefaultGroup+"/dead-letters/"+one.DeadLetterID+"/requeue", nil)
		redistest.Eventually(t, 20*time.Second, "the requeued dead letter delivered", func() bool { return sink.delivered(one.ID) })
		redriven := 0
		for _, ep := range []string{"attempts", "aged"} {
			r, err := dispatch.Redrive(ctx, q, "", ep, false)
			if err != nil {
				t.Fatal(err)
			}
			redriven += len(r)
		}
		if redriven != len(all)-1 {
			t.Errorf("redrove %d by endpoint, want %d", redriven, len(all)-1)
		}
		redistest.Eventually(t, 30*time.Second, "every redriven fire delivered", func() bool {
			for _, id := range all {
				if !sink.delivered(id) {
					return false
				}
			}
			return true
		})
		for _, id := range all {
			hs := sink.of(id)
			last := hs[len(hs)-1]
			if last.webhookID != hs[0].webhookID || last.attempt != "1" {
				t.Errorf("%s redriven: webhook-id %s attempt %s; want the first attempt's %s, attempt 1", id, last.webhookID, last.attempt, hs[0].webhookID)
			}
		}
		if dls := deadLetters(); len(dls) != 0 {
			t.Errorf("%d dead letters left after the redrive", len(dls))
		}
	})
}

// A 5 s endpoint beside a fast one: the slow one holds every attempt slot
// it has (max_in_flight 2) and a backlog besides, and the fast one's
// fires, due while it does, arrive as promptly as without it: no fast
// fire later than 1 s after its due time, where waiting behind the slow
// endpoint would cost seconds. The slow one's fires arrive too, later.
func TestDeliverSlowEndpointBesideFast(t *testing.T) {
	skipShort(t, "a 5 s endpoint")
	// Wall time it waits, not a core: beside the package's other
	// waits rather than after them (issue 36). Its workers, receivers
	// and namespaces are its own.
	t.Parallel()
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		ns := redistest.Namespace(t)
		var slowBusy atomic.Int64
		release := make(chan struct{})
		t.Cleanup(func() { close(release) }) // before the sink closes
		var mu sync.Mutex
		var overlapped int
		sink := newChaosSink(t, func(r *http.Request) int {
			if r.URL.Path == "/slow" {
				slowBusy.Add(1)
				defer slowBusy.Add(-1)
				// Wall time is what is under test: a 5 s endpoint.
				select {
				case <-time.After(5 * time.Second):
				case <-release:
				}
				return http.StatusNoContent
			}
			if slowBusy.Load() > 0 {
				mu.Lock()
				overlapped++
				mu.Unlock()
			}
			return http.StatusNoContent
		})
		w, _ := deliverWorker(t, b, ns)
		base := w.url + "/v1/namespaces/" + ns
		send(t, "PUT", base+"/endpoints/slow", map[string]any{"url": sink.URL + "/slow", "secrets": []string{deliver.GenerateSecret()},
			"timeout": "20s", "max_in_flight": 2})
		send(t, "PUT", base+"/endpoints/fast", map[string]any{"url": sink.URL + "/fast", "secrets": []string{deliver.GenerateSecret()},
			"max_in_flight": 4})
		slowN, fastN, step := 6, 40, 150*time.Millisecond
		if b.Mini != nil {
			fastN, step = 15, 300*time.Millisecond
		}
		// The slow endpoint's fires are due first: they fill its slots
		// (2) and its backlog before the fast ones come due.
		slow := scheduleOver(t, base, "slow", "slow", slowN, 300*time.Millisecond, 10*time.Millisecond)
		fast := scheduleOver(t, base, "fast", "fast", fastN, 800*time.Millisecond, step)
		redistest.Eventually(t, 60*time.Second, "every fire delivered", func() bool {
			for _, id := range append(slices.Clone(slow), fast...) {
				if !sink.delivered(id) {
					return false
				}
			}
			return true
		})
		neverEarly(t, sink.of(""))
		var late []time.Duration
		for _, id := range fast {
			hs := sink.of(id)
			late = append(late, hs[0].at.Sub(hs[0].due))
		}
		sort.Slice(late, func(i, j int) bool { return late[i] < late[j] })
		var slowLate []time.Duration
		for _, id := range slow {
			hs := sink.of(id)
			slowLate = append(slowLate, hs[len(hs)-1].at.Sub(hs[len(hs)-1].due))
		}
		mu.Lock()
		ov := overlapped
		mu.Unlock()
		t.Logf("fast lateness p50 %v p90 %v max %v; slow endpoint's last arrivals %v late; %d of %d fast fires while a slow request was under way",
			late[len(late)/2], late[len(late)*9/10], late[len(late)-1], slices.Max(slowLate).Round(time.Millisecond), ov, fastN)
		if late[len(late)-1] > time.Second {
			t.Errorf("a fast fire arrived %v after its due time beside a 5 s endpoint; lateness %v", late[len(late)-1], late)
		}
		// The test means something only if the slow endpoint was busy
		// while most fast fires were delivered.
		if ov < fastN/2 {
			t.Errorf("only %d of %d fast fires arrived while the slow endpoint held a request", ov, fastN)
		}
		if slices.Max(slowLate) < 5*time.Second {
			t.Errorf("the slow endpoint's fires arrived at most %v late; it takes 5 s to answer", slices.Max(slowLate))
		}
	})
}
