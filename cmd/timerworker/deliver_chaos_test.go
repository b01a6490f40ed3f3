package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/timerq/timerq/deliver"
	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/queue"
)

// TestDeliverAtLeastOnceUnderKills: 3 timerworker --deliver replicas,
// 10,000 timers due over 5 s that deliver to a local receiver, and a
// random replica SIGKILLed (and restarted) every 0.5 s until all arrived.
// Every timer is received at least once, none before its due time (the
// receiver and Redis share this host's clock), every signature verifies;
// the number received more than once is logged.
func TestDeliverAtLeastOnceUnderKills(t *testing.T) {
	t.Parallel() // servers of its own; see docs/development.md, "Loops"
	srv := redistest.Start(t, redistest.Config{})
	rdb := srv.Client(t)
	ns := redistest.Namespace(t)
	q, err := queue.New(rdb, queue.Options{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	secret := deliver.GenerateSecret()
	key, _ := deliver.ParseSecret(secret)

	type receipt struct {
		at, due time.Time
		sigErr  error
	}
	var mu sync.Mutex
	got := map[string][]receipt{}
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		at := time.Now()
		body, _ := io.ReadAll(r.Body)
		due, _ := time.Parse(time.RFC3339Nano, r.Header.Get(deliver.HeaderDueAt))
		rc := receipt{at: at, due: due, sigErr: deliver.Verify(r.Header, body, at, key)}
		mu.Lock()
		id := r.Header.Get(deliver.HeaderTimerID)
		got[id] = append(got[id], rc)
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	defer sink.Close()
	if _, err := q.Endpoints().Put(context.Background(), queue.Endpoint{Name: "sink", URL: sink.URL, Secrets: []queue.Secret{queue.Secret(secret)},
		MaxInFlight: 64}, &queue.PutEndpointOptions{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}); err != nil {
		t.Fatal(err)
	}
	const n = 10000
	base := time.Now().Add(time.Second)
	batch := make([]queue.NewTimer, n)
	for i := range batch {
		batch[i] = queue.NewTimer{ID: fmt.Sprint("t", i), Due: base.Add(time.Duration(i) * 5 * time.Second / n), Endpoint: "sink",
			Payload: []byte(fmt.Sprintf(`{"n":%d}`, i))}
	}
	for i := 0; i < n; i += 1000 {
		if _, err := q.ScheduleBatch(context.Background(), batch[i:i+1000]); err != nil {
			t.Fatal(err)
		}
	}
	// A short lease, so that the fires a killed replica held are taken
	// over within seconds.
	args := []string{"--redis", srv.URL(), "--namespace", ns, "--deliver", "--deliver-allow", "127.0.0.1/32", "--deliver-lease", "2s"}
	workers := make([]*proc, 3)
	for i := range workers {
		workers[i] = startWorker(t, args...)
	}
	received := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(got)
	}
	kills := 0
	deadline := time.Now().Add(90 * time.Second)
	for received() < n && time.Now().Before(deadline) {
		time.Sleep(500 * time.Millisecond) // the kill interval is what is under test
		i := kills % len(workers)
		workers[i].kill()
		kills++
		workers[i] = startWorker(t, args...)
	}
	waitFor(t, 30*time.Second, "every timer to arrive", func() bool { return received() >= n })
	for i, w := range workers {
		waitFor(t, 10*time.Second, "the worker to start", func() bool { return strings.Contains(w.logText(), "worker started") })
		if code, _ := w.term(); code != 0 {
			t.Errorf("worker %d: exit %d on SIGTERM; log:\n%s", i, code, w.logText())
		}
	}
	mu.Lock()
	defer mu.Unlock()
	dup, extra, early, bad := 0, 0, 0, 0
	for _, tm := range batch {
		rs := got[tm.ID]
		if len(rs) > 1 {
			dup++
			extra += len(rs) - 1
		}
		for _, r := range rs {
			// The header's due time is the timer's as timerq stores it,
			// rounded up to the microsecond, as a fire records it: floored
			// to the millisecond, like the fire time (docs/redis-layout.md,
			// "Due scores").
			if r.at.Before(tm.Due) || !r.due.Equal(tm.Due.Add(time.Microsecond-1).Truncate(time.Microsecond).Truncate(time.Millisecond)) {
				early++
			}
			if r.sigErr != nil {
				bad++
			}
		}
	}
	t.Logf("%d kills; %d timers, %d received more than once (%d extra requests)", kills, n, dup, extra)
	if len(got) != n || early != 0 || bad != 0 {
		t.Fatalf("%d of %d timers received, %d requests before their due time (or with another due time), %d bad signatures", len(got), n, early, bad)
	}
}
