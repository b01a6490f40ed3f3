package poller_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/poller"
	"github.com/timerq/timerq/queue"
)

// holders tracks how many pollers believe they hold maintenance at once.
type holders struct {
	cur, peak atomic.Int32
	mu        sync.Mutex
	who       []int // holder index per acquisition
}

func (h *holders) hook(i int) func(bool) {
	return func(held bool) {
		if !held {
			h.cur.Add(-1)
			return
		}
		if n := h.cur.Add(1); n > h.peak.Load() {
			h.peak.Store(n)
		}
		h.mu.Lock()
		h.who = append(h.who, i)
		h.mu.Unlock()
	}
}

func (h *holders) last() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.who) == 0 {
		return -1
	}
	return h.who[len(h.who)-1]
}

func (h *holders) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.who)
}

// TestMaintenanceOneHolderAndTakeover runs 3 pollers, each with its own
// client: one holds maintenance at a time; after a graceful stop another
// takes over at once, and after a "kill" (its client closed, so it can
// neither extend nor release) another takes over within the lock expiry.
// Purging also runs: settled records past their retention disappear.
func TestMaintenanceOneHolderAndTakeover(t *testing.T) {
	t.Parallel() // a server of its own; see docs/development.md, "Loops"
	srv := redistest.Start(t, redistest.Config{})
	ns := redistest.Namespace(t)
	// The holder extends every expiry/3 and loses the lock when it stalls
	// for 2/3 of the expiry; at load 15 under -race a 600 ms expiry lost it
	// to a 400 ms stall (a second acquisition, by design). 2 s keeps the
	// test about the lock, not about the scheduler.
	const expiry = 2 * time.Second
	var h holders
	var purged atomic.Int64
	type replica struct {
		rdb  *redis.Client
		p    *poller.Poller
		stop func()
	}
	var rs []*replica
	for i := range 3 {
		rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true})
		t.Cleanup(func() { rdb.Close() })
		q, err := queue.New(rdb, queue.Options{Namespace: ns, Retention: 50 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { q.Close() })
		p, err := poller.New(q, poller.Options{
			Logger: (&logBuf{}).logger(),
			Maintenance: poller.MaintenanceOptions{
				LockExpiry: expiry, AcquireInterval: 50 * time.Millisecond,
				PurgeInterval: 50 * time.Millisecond, StatsInterval: 50 * time.Millisecond,
			},
			Hooks: poller.Hooks{Maintenance: h.hook(i), Purged: func(n int) { purged.Add(int64(n)) }},
		})
		if err != nil {
			t.Fatal(err)
		}
		rs = append(rs, &replica{rdb: rdb, p: p, stop: start(t, p)})
	}
	waitFor(t, 3*time.Second, "a holder", func() bool { return h.count() > 0 })

	// Purging: fire timers whose records expire 50 ms later.
	q, _ := queue.New(srv.Client(t), queue.Options{Namespace: ns, Retention: 50 * time.Millisecond})
	var batch []queue.NewTimer
	for i := range 2500 {
		batch = append(batch, queue.NewTimer{ID: fmt.Sprint("p", i), Due: time.Now()})
	}
	if _, err := q.ScheduleBatch(context.Background(), batch); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "fired records to be purged", func() bool {
		s, err := q.Stats(context.Background())
		// The Purged hook runs after the pass that emptied the set, so
		// wait for it too rather than racing it.
		return err == nil && s.Scheduled == 0 && s.Fired == 0 && purged.Load() >= 2500
	})
	if purged.Load() != 2500 {
		t.Errorf("Purged hooks total %d, want 2500 (each record purged once)", purged.Load())
	}

	// Let the holder extend a few times: nobody else may get in. A real
	// sleep: the lock's PEXPIRE on real Redis runs on wall time, and what
	// is tested is that the holder's extensions beat it for several
	// expiries.
	time.Sleep(2 * expiry)
	if h.count() != 1 {
		t.Fatalf("%d acquisitions while the holder lived, want 1", h.count())
	}

	// Graceful stop: the lock is released, so another takes over at once.
	first := h.last()
	began := time.Now()
	rs[first].stop()
	waitFor(t, expiry, "a takeover after a graceful stop", func() bool { return h.count() == 2 })
	t.Logf("takeover after graceful stop: %v", time.Since(began))

	// Kill: close the holder's client, then stop it. Its lock key stays
	// until it expires.
	second := h.last()
	if second == first {
		t.Fatal("the stopped poller took the lock again")
	}
	began = time.Now()
	rs[second].rdb.Close()
	rs[second].stop()
	waitFor(t, expiry+time.Second, "a takeover after a kill", func() bool { return h.count() == 3 })
	took := time.Since(began)
	t.Logf("takeover after kill: %v", took)
	if took > expiry+time.Second {
		t.Errorf("takeover took %v, want within the lock expiry %v (+ the acquire interval, and slack for a loaded machine)", took, expiry)
	}
	if p := h.peak.Load(); p != 1 {
		t.Errorf("%d pollers held maintenance at once, want 1", p)
	}
}

// TestMaintenanceStopsWhenLockLost: if the lock is taken over behind the
// holder's back (as after a pause longer than the expiry), its next
// extension fails and it stops maintenance at once.
func TestMaintenanceStopsWhenLockLost(t *testing.T) {
	srv := redistest.Start(t, redistest.Config{})
	rdb := srv.Client(t)
	q := newQueue(t, rdb, redistest.Namespace(t))
	var held atomic.Bool
	var logs logBuf
	p, err := poller.New(q, poller.Options{
		Logger: logs.logger(),
		Maintenance: poller.MaintenanceOptions{
			LockExpiry: 600 * time.Millisecond, AcquireInterval: time.Hour,
		},
		Hooks: poller.Hooks{Maintenance: held.Store},
	})
	if err != nil {
		t.Fatal(err)
	}
	start(t, p)
	waitFor(t, 2*time.Second, "the lock", held.Load)
	if err := rdb.Set(context.Background(), p.MaintenanceLockKey(), "someone-else", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	// Extensions run every expiry/3 = 200 ms.
	waitFor(t, 400*time.Millisecond, "maintenance to stop", func() bool { return !held.Load() })
	if logs.count("maintenance lock lost") != 1 {
		t.Errorf("want one 'maintenance lock lost' log line")
	}
	if v, _ := rdb.Get(context.Background(), p.MaintenanceLockKey()).Result(); v != "someone-else" {
		t.Errorf("the other owner's lock was changed to %q", v)
	}
}
