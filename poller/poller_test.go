package poller_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/poller"
	"github.com/timerq/timerq/queue"
)

// TestMain runs up to 6 parallel tests at once unless -parallel says
// otherwise: the parallel ones (Sentinel and Cluster failovers, replicas,
// servers of their own) mostly wait, and 2 at once on 2 cores left the
// package's last minute to five of them in turn.
func TestMain(m *testing.M) {
	redistest.DefaultParallel(6)
	goleak.VerifyTestMain(redistest.Shared(m))
}

// logBuf is a goroutine-safe log sink.
type logBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuf) count(substr string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Count(l.b.String(), substr)
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func (l *logBuf) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

func newQueue(t *testing.T, rdb redis.UniversalClient, ns string) *queue.Queue {
	t.Helper()
	q, err := queue.New(rdb, queue.Options{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Close() })
	return q
}

// start runs p until the test ends (or stop is called) and checks that Run
// returns nil promptly.
func start(t *testing.T, p *poller.Poller) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Run = %v, want nil", err)
				}
			case <-time.After(5 * time.Second):
				t.Errorf("Run did not return within 5s of cancellation")
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// fireEntries counts fire stream entries per timer ID and checks none fired
// before its due time.
func fireEntries(t *testing.T, rdb redis.UniversalClient, q *queue.Queue) map[string]int {
	t.Helper()
	msgs, err := rdb.XRange(context.Background(), q.Keys().Stream(0), "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, m := range msgs {
		id, _ := m.Values["id"].(string)
		due, _ := m.Values["due"].(string)
		fired, _ := m.Values["fired"].(string)
		if fired < due && len(fired) == len(due) {
			t.Errorf("timer %s fired at %s before its due time %s", id, fired, due)
		}
		out[id]++
	}
	return out
}

func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	redistest.Eventually(t, d, what, cond)
}

func TestPollerFiresBacklogAndUpcoming(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		q := newQueue(t, b.Client, redistest.Namespace(t))
		var batch []queue.NewTimer
		// Overdue timers (several full batches of 100) and 50 due
		// shortly. miniredis runs Lua a hundred times slower than Redis
		// under -race, so its arm gets 300: firing 1050 took 0.7 s on a
		// quiet machine and over 5 s at load 24, CPU-starved Lua, not a
		// stuck poller. The real server carries 1000.
		overdue := 1000
		if b.Mini != nil {
			overdue = 300
		}
		for i := range overdue {
			batch = append(batch, queue.NewTimer{ID: fmt.Sprint("old", i), Due: time.Now().Add(-time.Minute)})
		}
		for i := range 50 {
			batch = append(batch, queue.NewTimer{ID: fmt.Sprint("new", i), Due: time.Now().Add(time.Duration(100+4*i) * time.Millisecond)})
		}
		if _, err := q.ScheduleBatch(ctx, batch); err != nil {
			t.Fatal(err)
		}
		var fired atomic.Int64
		var mu sync.Mutex
		var claimedAt []time.Time
		const idlePoll = 200 * time.Millisecond
		p, err := poller.New(q, poller.Options{
			BatchSize:       100,
			MaxPollInterval: idlePoll,
			Hooks: poller.Hooks{Claimed: func(r queue.ClaimResult) {
				mu.Lock()
				claimedAt = append(claimedAt, time.Now())
				mu.Unlock()
				fired.Add(int64(len(r.Fired)))
			}},
		})
		if err != nil {
			t.Fatal(err)
		}
		start(t, p)
		// A bound for a stuck poller, not a speed: the quiet mini arm fires
		// its 350 in about 0.4 s.
		waitFor(t, 10*time.Second, "every timer to fire", func() bool { return fired.Load() == int64(len(batch)) })
		got := fireEntries(t, b.Client, q)
		if len(got) != len(batch) {
			t.Fatalf("%d distinct timers in the fire stream, want %d", len(got), len(batch))
		}
		for id, n := range got {
			if n != 1 {
				t.Errorf("timer %s fired %d times", id, n)
			}
		}
		// Idle: with the due set empty the poller sleeps MaxPollInterval
		// between claims, not a busy loop. The loop counts that sleep from
		// when it sent the last claim, and the hook sees a claim when its
		// reply is read: a reply that load delays leaves less of the sleep,
		// so one gap between hooks can be a millisecond (seen at load 20)
		// with no busy loop. What load cannot shorten: claim i+1 is sent
		// after hook i, and claim i+2 at least MaxPollInterval after that
		// and before hook i+2. So three idle claims span more than
		// MaxPollInterval; a busy loop's three span a few milliseconds.
		numClaims := func() int { mu.Lock(); defer mu.Unlock(); return len(claimedAt) }
		before := numClaims()
		waitFor(t, 5*time.Second, "three idle claims", func() bool { return numClaims() >= before+3 })
		mu.Lock()
		idle := claimedAt[before : before+3]
		mu.Unlock()
		if span := idle[2].Sub(idle[0]); span <= idlePoll {
			t.Errorf("three idle claims span %v, want more than MaxPollInterval (%v): a busy loop", span, idlePoll)
		}
	})
}

// TestPollerWakesEarly: the poller sleeps towards a timer an hour away (and
// MaxPollInterval is an hour too), so only the wake message can make it
// fire a timer scheduled 50 ms ahead before the hour is up. Woken by the
// message, a timer fires within a stall of its due time; missed, an hour
// late: the test tells them apart by a minute, orders of magnitude from
// both, and never asserts how fast a loaded machine wakes (it measured a
// 108 ms stall at load 24 once, against a former 100 ms bound).
func TestPollerWakesEarly(t *testing.T) {
	srv := redistest.Start(t, redistest.Config{})
	rdb := srv.Client(t)
	ctx := context.Background()
	q := newQueue(t, rdb, redistest.Namespace(t))
	if _, err := q.Schedule(ctx, "far", time.Now().Add(time.Hour), nil); err != nil {
		t.Fatal(err)
	}
	var claims atomic.Int64
	const poll = time.Hour
	// woken bounds the lateness of a timer the wake message fired: far
	// above any stall of a loaded machine, far below the poll.
	const woken = time.Minute
	p, err := poller.New(q, poller.Options{
		MaxPollInterval: poll,
		Hooks:           poller.Hooks{Claimed: func(queue.ClaimResult) { claims.Add(1) }},
	})
	if err != nil {
		t.Fatal(err)
	}
	start(t, p)
	// The first claim, then the one after the subscription is confirmed.
	// The second claim is the one the subscription's confirmation
	// triggers: from then on a wake message reaches the sleeping poller.
	waitFor(t, 5*time.Second, "the poller to subscribe and sleep", func() bool { return claims.Load() >= 2 })
	sleeping := claims.Load()

	for i := range 3 {
		id := fmt.Sprint("soon", i)
		if _, err := q.Schedule(ctx, id, time.Now().Add(50*time.Millisecond), nil); err != nil {
			t.Fatal(err)
		}
		wctx, cancel := context.WithTimeout(ctx, woken)
		err := q.Wait(wctx, id)
		cancel()
		if err != nil {
			t.Fatalf("timer 50ms ahead did not fire within %v, though the poller polls every %v: "+
				"the wake message did not wake it: %v", woken, poll, err)
		}
		tm, err := q.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if late := tm.FiredAt.Sub(tm.Due); late < 0 || late >= woken {
			t.Errorf("%s fired %v after its due time, want 0 (never early) up to %v (woken, not polled every %v)",
				id, late, woken, poll)
		}
	}
	// Woken by messages, not by polling: a handful of claims, not hundreds.
	if n := claims.Load() - sleeping; n > 9 {
		t.Errorf("%d claims for 3 early timers, want few", n)
	}
}

func TestPollerBacksOffAndRecovers(t *testing.T) {
	m, _ := redistest.Mini(t)
	// No go-redis retries: they would space the failed claims out by
	// themselves and hide a missing backoff.
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr(), MaxRetries: -1})
	t.Cleanup(func() { rdb.Close() })
	ctx := context.Background()
	q := newQueue(t, rdb, redistest.Namespace(t))
	var logs logBuf
	var mu sync.Mutex
	var failedAt []time.Time
	numFailed := func() int { mu.Lock(); defer mu.Unlock(); return len(failedAt) }
	p, err := poller.New(q, poller.Options{
		BackoffMin:  20 * time.Millisecond,
		BackoffMax:  200 * time.Millisecond,
		Logger:      logs.logger(),
		Maintenance: poller.MaintenanceOptions{Disabled: true},
		Hooks: poller.Hooks{ClaimFailed: func(error) {
			mu.Lock()
			failedAt = append(failedAt, time.Now())
			mu.Unlock()
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	m.SetError("LOADING Redis is loading the dataset in memory")
	start(t, p)
	waitFor(t, 10*time.Second, "seven failed claims", func() bool { return numFailed() >= 7 })
	// Retry n waits at least half of min(20ms<<(n-1), 200ms) (equal
	// jitter): 10+20+40+80+100+100 ms between the first failure and the
	// seventh. A flood (no backoff) would take a few milliseconds. A lower
	// bound on wall time, which load can only lengthen.
	mu.Lock()
	spent := failedAt[6].Sub(failedAt[0])
	mu.Unlock()
	if spent < 350*time.Millisecond {
		t.Errorf("seven failed claims within %v, want at least 350ms of backoff between them", spent)
	}
	m.SetError("")
	if _, err := q.Schedule(ctx, "after", time.Now(), nil); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if err := q.Wait(wctx, "after"); err != nil {
		t.Fatalf("no fire after recovery: %v", err)
	}
	waitFor(t, time.Second, "the recovery log line", func() bool { return logs.count("claims succeed again") == 1 })
	// Claims succeed again, so no more failures come: one log line each.
	if lines := logs.count("claim failed; retrying"); lines != numFailed() {
		t.Errorf("ClaimFailed called %d times, %d 'claim failed' log lines", numFailed(), lines)
	}
}

func TestPollerGracefulStop(t *testing.T) {
	_, rdb := redistest.Mini(t)
	q := newQueue(t, rdb, redistest.Namespace(t))
	p, err := poller.New(q, poller.Options{})
	if err != nil {
		t.Fatal(err)
	}
	stop := start(t, p)
	waitFor(t, 2*time.Second, "a claim", func() bool { return !p.LastClaim().IsZero() })
	waitFor(t, 2*time.Second, "the maintenance lock", p.HoldsMaintenance)
	if err := p.Run(context.Background()); !errors.Is(err, poller.ErrRunning) {
		t.Errorf("second Run = %v, want ErrRunning", err)
	}
	began := time.Now()
	stop()
	if d := time.Since(began); d > time.Second {
		t.Errorf("Run took %v to return after cancellation", d)
	}
	if p.HoldsMaintenance() {
		t.Error("still holds maintenance after Run returned")
	}
	// The lock was released, not left to expire.
	if n, _ := rdb.Exists(context.Background(), p.MaintenanceLockKey()).Result(); n != 0 {
		t.Error("maintenance lock key still exists after a graceful stop")
	}
}

func TestOptionsValidation(t *testing.T) {
	_, rdb := redistest.Mini(t)
	q := newQueue(t, rdb, "v")
	for _, o := range []poller.Options{
		{BatchSize: -1},
		{BatchSize: queue.MaxBatch + 1},
		{MaxPollInterval: -time.Second},
		{BackoffMin: time.Second, BackoffMax: time.Millisecond},
		{Maintenance: poller.MaintenanceOptions{LockExpiry: time.Millisecond}},
		{Takeover: poller.TakeoverOptions{After: -time.Millisecond}},
		{MinClaimInterval: -time.Millisecond},
		{MinClaimInterval: 2 * time.Second, MaxPollInterval: time.Second},
	} {
		if _, err := poller.New(q, o); !errors.Is(err, queue.ErrInvalidOptions) {
			t.Errorf("New(%+v) = %v, want ErrInvalidOptions", o, err)
		}
	}
	if _, err := poller.New(nil, poller.Options{}); err == nil {
		t.Error("New(nil queue) succeeded")
	}
	p, err := poller.New(q, poller.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Options().Takeover.After; got != poller.DefaultTakeoverAfter {
		t.Errorf("Takeover.After defaults to %v, want %v", got, poller.DefaultTakeoverAfter)
	}
	if got := p.Options().MinClaimInterval; got != poller.DefaultMinClaimInterval {
		t.Errorf("MinClaimInterval defaults to %v, want %v", got, poller.DefaultMinClaimInterval)
	}
}

// TestMinClaimIntervalGathersTimers: after a claim that fired a timer, the
// next claim waits MinClaimInterval from that claim's start, so timers that
// come due in between fire together in it, none of them early. a is due
// 200 ms before b and b 40 ms before c, and the interval is 600 ms: a's
// claim would have to be 200 ms late to take b too, and then b and c share
// the claim after a's; without the interval each would have a claim of its
// own, at its due time.
func TestMinClaimIntervalGathersTimers(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		q := newQueue(t, b.Client, redistest.Namespace(t))
		const interval = 600 * time.Millisecond
		var mu sync.Mutex
		var claims [][]string // the IDs each claim fired, for those that fired any
		p, err := poller.New(q, poller.Options{
			MinClaimInterval: interval,
			Hooks: poller.Hooks{Claimed: func(r queue.ClaimResult) {
				if len(r.Fired) == 0 {
					return
				}
				var ids []string
				for _, f := range r.Fired {
					ids = append(ids, f.ID)
				}
				sort.Strings(ids)
				mu.Lock()
				claims = append(claims, ids)
				mu.Unlock()
			}},
		})
		if err != nil {
			t.Fatal(err)
		}
		start(t, p)
		// Due times relative to the server's clock, after the poller's
		// first claims. Each ScheduleIn reads that clock, so under load c's
		// due time can land before b's: the grouping is what is checked,
		// and each claim's IDs are sorted above.
		for _, s := range []struct {
			id string
			in time.Duration
		}{{"a", 200 * time.Millisecond}, {"b", 400 * time.Millisecond}, {"c", 440 * time.Millisecond}} {
			if _, err := q.ScheduleIn(ctx, s.id, s.in, nil); err != nil {
				t.Fatal(err)
			}
		}
		for _, id := range []string{"a", "b", "c"} {
			wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			err := q.Wait(wctx, id)
			cancel()
			if err != nil {
				t.Fatalf("Wait(%s): %v", id, err)
			}
		}
		// A waiter can see the fire before the poller has the claim's
		// reply, and so before the hook ran.
		reported := func() int {
			mu.Lock()
			defer mu.Unlock()
			n := 0
			for _, ids := range claims {
				n += len(ids)
			}
			return n
		}
		waitFor(t, 10*time.Second, "the hook to report the three fires", func() bool { return reported() >= 3 })
		mu.Lock()
		got := fmt.Sprint(claims)
		mu.Unlock()
		if got != "[[a] [b c]]" {
			t.Errorf("claims fired %s, want [[a] [b c]]: b and c come due within MinClaimInterval (%v) of a's claim", got, interval)
		}
		// The interval runs from the claim's send, a's fire time from when
		// Redis ran it, so the gap between the fire times is not checked:
		// the grouping above is what the interval does.
		for _, id := range []string{"a", "b", "c"} {
			tm, err := q.Get(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if tm.FiredAt.Before(tm.Due) {
				t.Errorf("%s fired at %v, before its due time %v", id, tm.FiredAt, tm.Due)
			}
		}
	})
}
