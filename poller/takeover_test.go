package poller_test

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/timerq/timerq/internal/keyspace"
	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/poller"
	"github.com/timerq/timerq/queue"
)

// A worker that owns shards but never claims them (a crash whose
// membership has not lapsed: here it lasts an hour) must not stall them:
// the live worker, which does not own them, claims their timers once they
// are overdue, and each fires once. With the takeover disabled they would
// wait the hour. On the Cluster, the shards' keys live on three masters.
// An unsharded namespace's one shard has an owner too, and is taken over
// the same way.
func TestNonOwnerClaimsOverdueShard(t *testing.T) {
	t.Parallel() // its own namespace on each backend; see docs/development.md, "Loops"
	for _, shards := range []int{16, 1} {
		t.Run(fmt.Sprint("shards", shards), func(t *testing.T) { testNonOwnerClaimsOverdueShard(t, shards) })
	}
}

func testNonOwnerClaimsOverdueShard(t *testing.T, shards int) {
	redistest.ForEachAll(t, func(t *testing.T, b *redistest.Backend) {
		// The test makes its own namespace, so the Cluster's 1- and
		// 16-shard arms run alike.
		ctx := context.Background()
		rdb := b.Client
		q := newShardedQueue(t, rdb, shards)
		// The ghost's membership runs an hour past the server's present.
		now, err := rdb.Time(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		// A ghost that owns some shards, not all: with one shard, the
		// ghost owns it.
		ghost := "ghost"
		for i := 0; ; i++ {
			n := len(poller.Owned([]string{ghost, "live"}, shards, ghost))
			if n > 0 && (n < shards || shards == 1) {
				break
			}
			ghost = fmt.Sprint("ghost-", i)
		}
		members := keyspace.Namespace(q.Namespace()).Workers()
		if err := rdb.ZAdd(ctx, members, redis.Z{Score: float64(now.Add(time.Hour).UnixMilli()), Member: ghost}).Err(); err != nil {
			t.Fatal(err)
		}
		ghostShards := poller.Owned([]string{ghost, "live"}, shards, ghost)
		p, err := poller.New(q, poller.Options{
			WorkerID: "live", Heartbeat: 50 * time.Millisecond, MemberTTL: time.Hour,
			Maintenance: poller.MaintenanceOptions{Disabled: true},
			Logger:      slog.New(slog.DiscardHandler),
		})
		if err != nil {
			t.Fatal(err)
		}
		start(t, p)
		waitFor(t, 5*time.Second, "the live worker to own its share", func() bool {
			return slices.Equal(p.OwnedShards(), poller.Owned([]string{ghost, "live"}, shards, "live"))
		})

		// Timers in every shard, due now and a little later, so that some
		// are scheduled while the watchers sleep.
		var batch []queue.NewTimer
		for i := range 200 {
			batch = append(batch, queue.NewTimer{ID: fmt.Sprint("t-", i), Due: now.Add(time.Duration(i%4) * 100 * time.Millisecond)})
		}
		if _, err := q.ScheduleBatch(ctx, batch); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 20*time.Second, "every timer, the ghost's shards' too, to fire", func() bool {
			st, err := q.Stats(ctx)
			return err == nil && st.Fired == int64(len(batch))
		})
		if got := p.OwnedShards(); slices.ContainsFunc(got, func(k int) bool { return slices.Contains(ghostShards, k) }) {
			t.Fatalf("the live worker owns %v, some of the ghost's %v: the test proves nothing", got, ghostShards)
		}
		seen := map[string]int{}
		inGhost := 0
		for k := range shards {
			for id, n := range shardFires(t, rdb, q, k) {
				seen[id] += n
				if slices.Contains(ghostShards, k) {
					inGhost += n
				}
			}
		}
		for _, tm := range batch {
			if seen[tm.ID] != 1 {
				t.Errorf("%s fired %d times, want 1", tm.ID, seen[tm.ID])
			}
		}
		if inGhost == 0 {
			t.Fatalf("no timer was in the ghost's shards %v: the test proves nothing", ghostShards)
		}
	})
}

// An unsharded namespace's one shard has one claimer however many workers
// run: the owner claims (here every 50 ms, MaxPollInterval), and the
// others only watch it: they read its head, at their start and on their
// subscription's confirmation too, and never claim while the owner keeps
// up (Takeover.After is an hour, so no lateness of a loaded machine counts
// as a dead owner). The owner starts first, so the others never own the
// shard, not even for their first heartbeat. Before ownership every
// worker claimed the shard each time, most claims finding nothing; before
// the watchers read the head at start they claimed there, and a claim
// that landed after the schedule below fired the owner's timers and, taken
// for a late owner, made the watcher claim again at their due times.
func TestUnshardedNamespaceHasOneClaimer(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		q := newQueue(t, b.Client, redistest.Namespace(t))
		ids := []string{"w0", "w1", "w2"}
		owner := -1
		for i, id := range ids {
			if len(poller.Owned(ids, 1, id)) == 1 {
				owner = i
			}
		}
		claims := make([]atomic.Int64, len(ids))
		ps := make([]*poller.Poller, len(ids))
		for i, id := range ids {
			p, err := poller.New(q, poller.Options{
				WorkerID: id, Heartbeat: 50 * time.Millisecond, MemberTTL: time.Hour,
				MaxPollInterval: 50 * time.Millisecond,
				Takeover:        poller.TakeoverOptions{After: time.Hour},
				Maintenance:     poller.MaintenanceOptions{Disabled: true},
				Logger:          slog.New(slog.DiscardHandler),
				Hooks:           poller.Hooks{Claimed: func(queue.ClaimResult) { claims[i].Add(1) }},
			})
			if err != nil {
				t.Fatal(err)
			}
			ps[i] = p
		}
		start(t, ps[owner])
		waitFor(t, 5*time.Second, "the owner to own the shard and claim it", func() bool {
			return len(ps[owner].OwnedShards()) == 1 && !ps[owner].LastClaim().IsZero()
		})
		for i := range ps {
			if i != owner {
				start(t, ps[i])
			}
		}
		waitFor(t, 5*time.Second, "one owner among three workers, each having claimed or heartbeated", func() bool {
			for i, p := range ps {
				if len(p.OwnedShards()) != len(poller.Owned(ids, 1, ids[i])) || p.LastClaim().IsZero() {
					return false
				}
			}
			return true
		})
		before := claims[owner].Load()
		var batch []queue.NewTimer
		for i := range 20 {
			batch = append(batch, queue.NewTimer{ID: fmt.Sprint("t-", i), Due: time.Now().Add(-time.Second)})
		}
		if _, err := q.ScheduleBatch(ctx, batch); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 10*time.Second, "the owner to fire every timer and claim 20 more times", func() bool {
			st, err := q.Stats(ctx)
			return err == nil && st.Fired == int64(len(batch)) && claims[owner].Load() >= before+20
		})
		for i := range ids {
			if n := claims[i].Load(); i != owner && n != 0 {
				t.Errorf("watcher %s claimed %d times while the owner %s claimed %d; a watcher claims only an overdue shard",
					ids[i], n, ids[owner], claims[owner].Load())
			}
		}
	})
}

// shardFires counts shard k's fire stream entries per timer ID and checks
// none fired before its due time.
func shardFires(t *testing.T, rdb redis.UniversalClient, q *queue.Queue, k int) map[string]int {
	t.Helper()
	msgs, err := rdb.XRange(context.Background(), q.Keys().Stream(k), "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, m := range msgs {
		id, _ := m.Values["id"].(string)
		due, err1 := strconv.ParseInt(fmt.Sprint(m.Values["due"]), 10, 64)
		fired, err2 := strconv.ParseInt(fmt.Sprint(m.Values["fired"]), 10, 64)
		if err1 != nil || err2 != nil {
			t.Fatalf("fire entry %s is malformed: %v", m.ID, m.Values)
		}
		if fired < due {
			t.Errorf("timer %s fired at %d, before its due time %d", id, fired, due)
		}
		out[id]++
	}
	return out
}

// A 16-shard namespace served by 4 workers, one of which crashes (its
// client closes, so it never leaves the membership) every 300 ms and is
// replaced by a new one, while 2,000 timers come due over 4 s: every timer
// fires once, none early, and none waits for long. Memberships last an
// hour, so every crashed worker keeps its shards for the whole test: only
// the takeover of overdue shards fires their timers.
func TestChaosWorkerCrashesOnShardedNamespace(t *testing.T) {
	if testing.Short() {
		t.Skip("the chaos runs ~10 s on a real redis-server")
	}
	s := redistest.SharedServer(t)
	ctx := context.Background()
	admin := s.Client(t)
	q := newShardedQueue(t, admin, 16)
	ns := q.Namespace()

	type worker struct {
		rdb  *redis.Client
		stop context.CancelFunc
		done chan error
	}
	var mu sync.Mutex
	spawn := func(i int) *worker {
		rdb := s.Client(t)
		wq, err := queue.New(rdb, queue.Options{Namespace: ns})
		if err != nil {
			t.Fatal(err)
		}
		p, err := poller.New(wq, poller.Options{
			WorkerID: fmt.Sprintf("w-%d", i), Heartbeat: 100 * time.Millisecond, MemberTTL: time.Hour,
			Maintenance: poller.MaintenanceOptions{Disabled: true},
			Logger:      slog.New(slog.DiscardHandler),
		})
		if err != nil {
			t.Fatal(err)
		}
		rctx, cancel := context.WithCancel(ctx)
		w := &worker{rdb: rdb, stop: cancel, done: make(chan error, 1)}
		go func() { w.done <- p.Run(rctx); wq.Close() }()
		return w
	}
	crash := func(w *worker) {
		// Closing the client first drops the connections, as a SIGKILL
		// does, and fails the leave that Run sends as it returns.
		_ = w.rdb.Close()
		w.stop()
		select {
		case <-w.done:
		case <-time.After(10 * time.Second):
			t.Errorf("a crashed worker's Run did not return within 10 s")
		}
	}
	ws := make([]*worker, 4)
	next := 0
	for i := range ws {
		ws[i] = spawn(next)
		next++
	}
	defer func() {
		mu.Lock()
		defer mu.Unlock()
		for _, w := range ws {
			w.stop()
			<-w.done
		}
	}()

	now, err := admin.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	const n, window = 2000, 4 * time.Second
	t0 := now.Add(500 * time.Millisecond)
	var batch []queue.NewTimer
	for i := range n {
		batch = append(batch, queue.NewTimer{ID: fmt.Sprint("c-", i), Due: t0.Add(window * time.Duration(i) / n)})
	}
	// Scheduled in slices as they come due, so that wake messages and
	// schedules run through the crashes too.
	schedDone := make(chan error, 1)
	go func() {
		for i := 0; i < n; i += 100 {
			// The server is local: its clock is the test's, near enough
			// for a lead of 300 ms.
			time.Sleep(time.Until(batch[i].Due.Add(-300 * time.Millisecond)))
			if _, err := q.ScheduleBatch(ctx, batch[i:i+100]); err != nil {
				schedDone <- err
				return
			}
		}
		schedDone <- nil
	}()
	// The crashes stop a second before the last due time: a new worker
	// claims every shard until its first heartbeat, which alone would fire
	// the crashed workers' shards now and then. The last second's timers
	// are left to the takeover.
	kills := 0
	for deadline := t0.Add(window - time.Second); time.Now().Before(deadline); kills++ {
		// The crash interval is the workload's pace (wall time is what is
		// under test: crashes while timers come due), not a wait.
		time.Sleep(300 * time.Millisecond)
		i := rand.N(len(ws))
		crash(ws[i])
		mu.Lock()
		ws[i] = spawn(next)
		next++
		mu.Unlock()
	}
	if err := <-schedDone; err != nil {
		t.Fatalf("ScheduleBatch: %v", err)
	}
	waitFor(t, 30*time.Second, "every timer to fire", func() bool {
		st, err := q.Stats(ctx)
		return err == nil && st.Fired == n
	})

	seen := map[string]int{}
	var worst time.Duration
	for k := range 16 {
		msgs, err := admin.XRange(ctx, q.Keys().Stream(k), "-", "+").Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range msgs {
			due, _ := strconv.ParseInt(fmt.Sprint(m.Values["due"]), 10, 64)
			fired, _ := strconv.ParseInt(fmt.Sprint(m.Values["fired"]), 10, 64)
			worst = max(worst, time.Duration(fired-due)*time.Millisecond)
		}
		for id, c := range shardFires(t, admin, q, k) {
			seen[id] += c
		}
	}
	lost, dups := 0, 0
	for _, tm := range batch {
		switch c := seen[tm.ID]; {
		case c == 0:
			lost++
		case c > 1:
			dups += c - 1
		}
	}
	if lost != 0 || dups != 0 {
		t.Errorf("%d lost, %d duplicate fires, want 0 and 0", lost, dups)
	}
	// A liveness check, not a speed target: without the takeover the
	// crashed workers' shards would wait an hour.
	if worst > 5*time.Second {
		t.Errorf("a timer fired %v late; every one should fire within 5 s", worst)
	}
	members, err := admin.ZCard(ctx, keyspace.Namespace(ns).Workers()).Result()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d crashes, %d memberships, worst lateness %v", kills, members, worst)
	// A worker crashed before its first heartbeat never joined; the others
	// stay members, owning shards that only the takeover fires.
	if kills < 4 || members <= 4 {
		t.Errorf("%d crashes left %d memberships, want at least 4 crashes and crashed workers still members", kills, members)
	}
}
