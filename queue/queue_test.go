package queue_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/timerq/timerq/internal/keyspace"
	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/queue"
)

// TestMain stops the shared server and Cluster before looking for leaked
// goroutines: their reapers belong to the binary, not to a test.
// TestMain runs up to 6 parallel tests at once unless -parallel says
// otherwise: most of the parallel ones wait on leases, blocks and replicas
// rather than compute.
func TestMain(m *testing.M) {
	redistest.DefaultParallel(6)
	code := redistest.Shared(m).Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// newQueue returns a queue in a namespace of its own, closed at cleanup.
func newQueue(t *testing.T, b *redistest.Backend, opts queue.Options) *queue.Queue {
	t.Helper()
	if opts.Namespace == "" {
		opts.Namespace = redistest.Namespace(t)
	}
	if b.Shards > 0 {
		if _, err := queue.CreateNamespace(context.Background(), b.Client, opts.Namespace, b.Shards); err != nil {
			t.Fatalf("CreateNamespace: %v", err)
		}
	}
	q, err := queue.New(b.Client, opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { q.Close() })
	return q
}

// nsKeys lists every key of the queue's namespace, of every shard, on every
// Cluster master, but the meta key that CreateNamespace writes and the
// marker an upgrade to layout 2 leaves in a shard's legacy due key, which
// a namespace of layout 2 holds without holding any data
// (TIMERQ_TEST_LAYOUT=2): only that exact value at that key is left out.
func nsKeys(t *testing.T, b *redistest.Backend, q *queue.Queue) []string {
	t.Helper()
	ctx := context.Background()
	pattern := keyspace.Namespace(q.Namespace()).Pattern()
	var keys []string
	var mu sync.Mutex
	collect := func(ctx context.Context, c *redis.Client) error {
		ks, err := c.Keys(ctx, pattern).Result()
		if err != nil {
			return err
		}
		var kept []string
		for _, k := range ks {
			if k == keyspace.Namespace(q.Namespace()).Meta() {
				continue
			}
			if strings.HasSuffix(k, "}:due") && isMarker(t, c, k) {
				continue
			}
			kept = append(kept, k)
		}
		mu.Lock()
		defer mu.Unlock()
		keys = append(keys, kept...)
		return nil
	}
	var err error
	if cc, ok := b.Client.(*redis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, collect)
	} else {
		err = collect(ctx, b.Client.(*redis.Client))
	}
	if err != nil {
		t.Fatalf("KEYS: %v", err)
	}
	slices.Sort(keys)
	return keys
}

// shardKeys returns the six keys of the shard that holds id.
func shardKeys(t *testing.T, q *queue.Queue, id string) []string {
	t.Helper()
	k, err := q.Inspect().ShardOf(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return q.Keys().Shard(k)
}

// fireEntries reads every shard's fire stream.
func fireEntries(t *testing.T, b *redistest.Backend, q *queue.Queue) []redis.XMessage {
	t.Helper()
	ctx := context.Background()
	n, err := q.Inspect().Shards(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var all []redis.XMessage
	for k := range n {
		entries, err := b.Client.XRange(ctx, q.Keys().Stream(k), "-", "+").Result()
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, entries...)
	}
	return all
}

// serverNow reads the Redis server's clock.
func serverNow(t *testing.T, b *redistest.Backend) time.Time {
	t.Helper()
	now, err := b.Client.Time(context.Background()).Result()
	if err != nil {
		t.Fatalf("TIME: %v", err)
	}
	return now
}

// ceilMicros rounds t up to the microsecond, as stored due times are.
func ceilMicros(t time.Time) time.Time {
	return t.Add(time.Microsecond - time.Nanosecond).Truncate(time.Microsecond)
}

// dueScoreText is a due time as the scripts write it in a due score or a
// wake message: "<ms>", or "<ms>.<us>" when it has microseconds.
func dueScoreText(t time.Time) string {
	us := ceilMicros(t).UnixMicro()
	if us%1000 == 0 {
		return strconv.FormatInt(us/1000, 10)
	}
	return fmt.Sprintf("%d.%03d", us/1000, us%1000)
}

// claimAll claims until nothing is due and returns what fired.
func claimAll(t *testing.T, q *queue.Queue) []queue.Fired {
	t.Helper()
	var all []queue.Fired
	for {
		res, err := q.Engine().Claim(context.Background(), queue.MaxBatch)
		if err != nil {
			t.Fatalf("Claim: %v", err)
		}
		all = append(all, res.Fired...)
		if len(res.Fired) < queue.MaxBatch {
			return all
		}
	}
}

func TestScheduleIsIdempotent(t *testing.T) {
	redistest.ForEachAll(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		q := newQueue(t, b, queue.Options{})
		before := serverNow(t, b).Truncate(time.Millisecond)
		due := time.Now().Add(time.Hour).Truncate(time.Millisecond)

		first, err := q.Schedule(ctx, "order-1", due, []byte("p1"))
		if err != nil {
			t.Fatal(err)
		}
		if !first.Created || first.Timer.State != queue.StateScheduled || !first.Timer.Due.Equal(due) ||
			string(first.Timer.Payload) != "p1" {
			t.Fatalf("first schedule = %+v", first)
		}
		if first.Timer.CreatedAt.Before(before) || first.Timer.CreatedAt.After(serverNow(t, b)) {
			t.Fatalf("CreatedAt %v is not the server clock (server was %v)", first.Timer.CreatedAt, before)
		}

		again, err := q.Schedule(ctx, "order-1", due.Add(time.Minute), []byte("other"))
		if err != nil {
			t.Fatal(err)
		}
		if again.Created || !again.Timer.Due.Equal(due) || string(again.Timer.Payload) != "p1" {
			t.Fatalf("second schedule changed the timer: %+v", again)
		}
		got, err := q.Get(ctx, "order-1")
		if err != nil || !got.Due.Equal(due) || string(got.Payload) != "p1" || !got.CreatedAt.Equal(first.Timer.CreatedAt) {
			t.Fatalf("Get = %+v, %v", got, err)
		}
	})
}

func TestFiredTimerIsNeverRearmed(t *testing.T) {
	redistest.ForEachAll(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		q := newQueue(t, b, queue.Options{})
		past := time.Now().Add(-time.Second)
		if _, err := q.Schedule(ctx, "replay", past, nil); err != nil {
			t.Fatal(err)
		}
		if fired := claimAll(t, q); len(fired) != 1 || fired[0].ID != "replay" {
			t.Fatalf("fired %+v, want just replay", fired)
		}
		res, err := q.Schedule(ctx, "replay", time.Now().Add(time.Hour), nil)
		if err != nil {
			t.Fatal(err)
		}
		if res.Created || res.Timer.State != queue.StateFired || res.Timer.FiredAt.IsZero() {
			t.Fatalf("re-schedule of a fired timer = %+v, want the fired record", res)
		}
		if fired := claimAll(t, q); len(fired) != 0 {
			t.Fatalf("fired again: %+v", fired)
		}
		// SleepUntil on the replay returns at once.
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		if err := q.SleepUntil(cctx, "replay", time.Now().Add(time.Hour), nil); err != nil {
			t.Fatalf("SleepUntil on a fired timer: %v", err)
		}
	})
}

func TestScheduleBatch(t *testing.T) {
	redistest.ForEachAll(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		q := newQueue(t, b, queue.Options{})
		due := time.Now().Add(time.Hour)
		if _, err := q.Schedule(ctx, "t-5", due, []byte("old")); err != nil {
			t.Fatal(err)
		}
		// More than one script call's worth, with a repeat inside the batch.
		var batch []queue.NewTimer
		for i := range 1203 {
			batch = append(batch, queue.NewTimer{ID: fmt.Sprintf("t-%d", i), Due: due.Add(time.Duration(i) * time.Millisecond), Payload: []byte("new")})
		}
		batch = append(batch, queue.NewTimer{ID: "t-7", Due: due})
		res, err := q.ScheduleBatch(ctx, batch)
		if err != nil {
			t.Fatal(err)
		}
		if len(res) != len(batch) {
			t.Fatalf("%d results for %d timers", len(res), len(batch))
		}
		for i, r := range res {
			wantCreated := i != 5 && i != len(batch)-1
			if r.Created != wantCreated || r.Timer.ID != batch[i].ID {
				t.Fatalf("result %d = %+v, want created=%v", i, r, wantCreated)
			}
		}
		if string(res[5].Timer.Payload) != "old" {
			t.Fatalf("existing timer's payload became %q", res[5].Timer.Payload)
		}
		st, err := q.Stats(ctx)
		if err != nil || st.Scheduled != 1203 {
			t.Fatalf("Stats = %+v, %v; want 1203 scheduled", st, err)
		}
	})
}

func TestCancel(t *testing.T) {
	redistest.ForEachAll(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		q := newQueue(t, b, queue.Options{})
		if _, err := q.Schedule(ctx, "c", time.Now().Add(-time.Millisecond), nil); err != nil {
			t.Fatal(err)
		}
		tm, err := q.Cancel(ctx, "c")
		if err != nil || tm.State != queue.StateCancelled || tm.CancelledAt.IsZero() {
			t.Fatalf("Cancel = %+v, %v", tm, err)
		}
		if again, err := q.Cancel(ctx, "c"); err != nil || !again.CancelledAt.Equal(tm.CancelledAt) {
			t.Fatalf("second Cancel = %+v, %v; want a no-op", again, err)
		}
		if fired := claimAll(t, q); len(fired) != 0 {
			t.Fatalf("a cancelled timer fired: %+v", fired)
		}
		if _, err := q.Cancel(ctx, "nope"); !errors.Is(err, queue.ErrNotFound) {
			t.Fatalf("Cancel unknown = %v, want ErrNotFound", err)
		}
		if _, err := q.Schedule(ctx, "f", time.Now().Add(-time.Millisecond), nil); err != nil {
			t.Fatal(err)
		}
		claimAll(t, q)
		if _, err := q.Cancel(ctx, "f"); !errors.Is(err, queue.ErrAlreadyFired) {
			t.Fatalf("Cancel fired = %v, want ErrAlreadyFired", err)
		}
	})
}

func TestReschedule(t *testing.T) {
	redistest.ForEachAll(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		q := newQueue(t, b, queue.Options{})
		if _, err := q.Schedule(ctx, "r", time.Now().Add(time.Hour), []byte("keep")); err != nil {
			t.Fatal(err)
		}
		if fired := claimAll(t, q); len(fired) != 0 {
			t.Fatalf("fired early: %+v", fired)
		}
		later := time.Now().Add(2 * time.Hour).Truncate(time.Millisecond)
		tm, err := q.Reschedule(ctx, "r", later)
		if err != nil || !tm.Due.Equal(later) || string(tm.Payload) != "keep" {
			t.Fatalf("Reschedule = %+v, %v", tm, err)
		}
		if _, err := q.FireNow(ctx, "r"); err != nil {
			t.Fatal(err)
		}
		fired := claimAll(t, q)
		if len(fired) != 1 || fired[0].ID != "r" || fired[0].Lateness() < 0 {
			t.Fatalf("after FireNow fired %+v", fired)
		}
		if _, err := q.Reschedule(ctx, "r", later); !errors.Is(err, queue.ErrAlreadyFired) {
			t.Fatalf("Reschedule fired = %v", err)
		}
		if _, err := q.Schedule(ctx, "c", later, nil); err != nil {
			t.Fatal(err)
		}
		if _, err := q.Cancel(ctx, "c"); err != nil {
			t.Fatal(err)
		}
		if _, err := q.Reschedule(ctx, "c", later); !errors.Is(err, queue.ErrCancelled) {
			t.Fatalf("Reschedule cancelled = %v", err)
		}
		if _, err := q.Reschedule(ctx, "missing", later); !errors.Is(err, queue.ErrNotFound) {
			t.Fatalf("Reschedule unknown = %v", err)
		}
	})
}

func TestClaimReportsNextDueAndStream(t *testing.T) {
	redistest.ForEachAll(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		q := newQueue(t, b, queue.Options{})
		now := serverNow(t, b)
		future := now.Add(time.Hour).Truncate(time.Millisecond)
		for i, due := range []time.Time{now.Add(-2 * time.Second), now.Add(-time.Second), future} {
			if _, err := q.Schedule(ctx, fmt.Sprint("id-", i), due, []byte(fmt.Sprint("pl-", i))); err != nil {
				t.Fatal(err)
			}
		}
		res, err := q.Engine().Claim(ctx, 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Fired) != 2 || res.Fired[0].ID != "id-0" || res.Fired[1].ID != "id-1" ||
			string(res.Fired[1].Payload) != "pl-1" {
			t.Fatalf("Claim fired %+v", res.Fired)
		}
		if !res.NextDue.Equal(future) {
			t.Fatalf("NextDue = %v, want %v", res.NextDue, future)
		}
		tm, err := q.Get(ctx, "id-0")
		if err != nil || tm.State != queue.StateFired || !tm.FiredAt.Equal(res.Now) {
			t.Fatalf("Get after claim = %+v, %v", tm, err)
		}
		entries := fireEntries(t, b, q)
		if len(entries) != 2 {
			t.Fatalf("stream = %v", entries)
		}
		if entries[0].Values["id"] != "id-0" {
			entries[0], entries[1] = entries[1], entries[0] // two shards' streams
		}
		if e := entries[0].Values; e["id"] != "id-0" || e["payload"] != "pl-0" ||
			e["fired"] != fmt.Sprint(res.Now.UnixMilli()) {
			t.Fatalf("stream entry = %v", e)
		}
	})
}

func TestFarFutureDueKeepsMillisecondPrecision(t *testing.T) {
	redistest.ForEachAll(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		q := newQueue(t, b, queue.Options{})
		// 15 digits of milliseconds: Lua's tostring would round this on real Redis.
		due := time.Date(9999, 12, 31, 23, 59, 59, 987_000_000, time.UTC)
		if _, err := q.Schedule(ctx, "far", due, nil); err != nil {
			t.Fatal(err)
		}
		if _, err := q.Reschedule(ctx, "far", due); err != nil {
			t.Fatal(err)
		}
		got, err := q.Get(ctx, "far")
		if err != nil || !got.Due.Equal(due) {
			t.Fatalf("Get = %v, %v; want due %v", got.Due, err, due)
		}
		page, err := q.List(ctx, queue.ListOptions{})
		if err != nil || len(page.Timers) != 1 || !page.Timers[0].Due.Equal(due) {
			t.Fatalf("List = %+v, %v", page, err)
		}
	})
}

func TestNeverEarly(t *testing.T) {
	redistest.ForEachAll(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		q := newQueue(t, b, queue.Options{})
		var batch []queue.NewTimer
		start := serverNow(t, b)
		for i := range 20 {
			batch = append(batch, queue.NewTimer{ID: fmt.Sprint(i), Due: start.Add(time.Duration(20+i*5) * time.Millisecond)})
		}
		if _, err := q.ScheduleBatch(ctx, batch); err != nil {
			t.Fatal(err)
		}
		fired := 0
		for fired < len(batch) {
			res, err := q.Engine().Claim(ctx, 100)
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range res.Fired {
				if f.FiredAt.Before(f.Due) || res.Now.Before(f.Due) {
					t.Fatalf("%s fired at %v, before its due time %v", f.ID, f.FiredAt, f.Due)
				}
				fired++
			}
			// Whatever is still pending must not be due yet by the server
			// clock. (Over several shards, one visited early may have a
			// timer come due by the time the last one is claimed.)
			if b.Shards <= 1 && !res.NextDue.IsZero() && !res.NextDue.After(res.Now) {
				t.Fatalf("claim left %v pending at %v though it was due", res.NextDue, res.Now)
			}
			// Claim next exactly when the server's clock reaches the next
			// due time: the instant an off-by-one would fire early.
			if !res.NextDue.IsZero() {
				reachServerTime(t, b, res.NextDue)
			}
		}
	})
}

func TestConcurrentClaimersFireEachTimerOnce(t *testing.T) {
	t.Parallel() // its own namespace on each backend; see docs/development.md, "Loops"
	redistest.ForEachAll(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		const claimers = 8
		n := 20_000
		if b.Mini != nil {
			// miniredis runs one script at a time under a global lock, so
			// its claimers cannot race inside a script however many timers
			// there are; real Redis and the Cluster are the race under
			// test. 20,000 timers through its Lua interpreter took 150 s
			// under -race on a loaded 2-core machine, near the suite's
			// timeout; 2,000 still check the Go side in a few seconds.
			n = 2_000
		}
		q := newQueue(t, b, queue.Options{})
		due := time.Now().Add(-time.Second)
		batch := make([]queue.NewTimer, n)
		for i := range batch {
			batch[i] = queue.NewTimer{ID: fmt.Sprintf("timer-%05d", i), Due: due.Add(time.Duration(i%50) * time.Microsecond * 10)}
		}
		if _, err := q.ScheduleBatch(ctx, batch); err != nil {
			t.Fatal(err)
		}
		errs := make(chan error, claimers)
		for range claimers {
			// Each claimer gets its own Queue, as separate workers would.
			cq, err := queue.New(b.Client, queue.Options{Namespace: q.Namespace()})
			if err != nil {
				t.Fatal(err)
			}
			go func() {
				for {
					res, err := cq.Engine().Claim(ctx, 64)
					if err != nil || len(res.Fired) == 0 {
						errs <- err
						return
					}
				}
			}()
		}
		for range claimers {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
		entries := fireEntries(t, b, q)
		seen := map[string]int{}
		for _, e := range entries {
			seen[e.Values["id"].(string)]++
		}
		for _, tm := range batch {
			if seen[tm.ID] != 1 {
				t.Fatalf("%s fired %d times", tm.ID, seen[tm.ID])
			}
		}
		if len(entries) != n {
			t.Fatalf("%d fire events for %d timers", len(entries), n)
		}
	})
}

func TestRetentionLeavesOnlyFixedKeys(t *testing.T) {
	t.Parallel() // its own namespace on each backend; see docs/development.md, "Loops"
	redistest.ForEachAll(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		const retention = 400 * time.Millisecond
		q := newQueue(t, b, queue.Options{Retention: retention})
		for i := range 30 {
			if _, err := q.Schedule(ctx, fmt.Sprint("k", i), time.Now().Add(-time.Millisecond), nil); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := q.Schedule(ctx, "to-cancel", time.Now().Add(time.Hour), nil); err != nil {
			t.Fatal(err)
		}
		// Each record is purgeable from its settling plus retention, by
		// the server clock. The server times around each call bound when
		// it settled and when the purge ran, so the purge is judged by
		// them: on a quiet machine it runs before any retention is over and
		// must remove nothing; a machine that stalled past a retention (a
		// 16-shard claim at load 24 once did) must remove exactly what may
		// have reached it, never more, never what cannot have.
		// Scripts read the clock to the millisecond, floored.
		serverMs := func() time.Time { return serverNow(t, b).Truncate(time.Millisecond) }
		cancelFrom := serverMs()
		if _, err := q.Cancel(ctx, "to-cancel"); err != nil {
			t.Fatal(err)
		}
		cancelTo := serverMs()
		claimAll(t, q)
		settled := serverMs()
		purgeFrom := settled
		n, _, err := q.Engine().Purge(ctx, 100)
		purgeTo := serverMs()
		if err != nil {
			t.Fatal(err)
		}
		// may counts the records whose retention may be over when the
		// purge ran, must those whose retention surely is.
		may, must := 0, 0
		if !purgeTo.Before(cancelFrom.Add(retention)) {
			may++
		}
		if !purgeFrom.Before(cancelTo.Add(retention)) {
			must++
		}
		if !purgeTo.Before(cancelTo.Add(retention)) { // the claims followed the cancel
			may += 30
		}
		if !purgeFrom.Before(settled.Add(retention)) {
			must += 30
		}
		if n < must || n > may {
			t.Fatalf("Purge %v..%v after the cancel (%v..%v) and the claims (by %v), with a %v retention, removed %d; want %d..%d",
				purgeFrom, purgeTo, cancelFrom, cancelTo, settled, retention, n, must, may)
		}
		if may > 0 {
			t.Logf("the machine stalled past the retention before the first purge (%v after the cancel); it removed %d", purgeTo.Sub(cancelFrom), n)
		}
		reachServerTime(t, b, settled.Add(retention+10*time.Millisecond))
		// What the first purge left: 31 records, or fewer after a stall.
		left := 31 - n
		if left > 20 {
			n, more, err := q.Engine().Purge(ctx, 20)
			if err != nil || n != 20 || !more {
				t.Fatalf("Purge = %d, %v, %v; want 20 and more", n, more, err)
			}
			left -= 20
		}
		if n, more, err := q.Engine().Purge(ctx, 100); err != nil || n != left || more {
			t.Fatalf("last Purge = %d, %v, %v; want %d, no more", n, more, err, left)
		}
		if _, err := q.Get(ctx, "k1"); !errors.Is(err, queue.ErrNotFound) {
			t.Fatalf("Get of a purged timer = %v", err)
		}
		keys := nsKeys(t, b, q)
		for _, k := range keys {
			if !strings.HasSuffix(k, ":fires") && !strings.HasSuffix(k, ":counters") {
				t.Fatalf("namespace keys after purge = %v, want only counters and fire streams", keys)
			}
		}
		if want := []string{q.Keys().Shard(0)[6], q.Keys().Stream(0)}; b.Shards <= 1 && strings.Join(keys, " ") != strings.Join(want, " ") {
			t.Fatalf("namespace keys after purge = %v, want only the counters and the fire stream", keys)
		}
	})
}

func TestKeepForeverNeverPurges(t *testing.T) {
	redistest.ForEachAll(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		q := newQueue(t, b, queue.Options{Retention: queue.KeepForever})
		if _, err := q.Schedule(ctx, "x", time.Now().Add(-time.Millisecond), nil); err != nil {
			t.Fatal(err)
		}
		claimAll(t, q)
		if n, _, err := q.Engine().Purge(ctx, 10); err != nil || n != 0 {
			t.Fatalf("Purge = %d, %v", n, err)
		}
		if tm, err := q.Get(ctx, "x"); err != nil || tm.State != queue.StateFired {
			t.Fatalf("Get = %+v, %v", tm, err)
		}
	})
}

func TestStats(t *testing.T) {
	redistest.ForEachAll(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		q := newQueue(t, b, queue.Options{})
		now := serverNow(t, b)
		for i, d := range []time.Duration{-3 * time.Second, -time.Second, time.Hour, 2 * time.Hour} {
			if _, err := q.Schedule(ctx, fmt.Sprint("s", i), now.Add(d), nil); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := q.Cancel(ctx, "s3"); err != nil {
			t.Fatal(err)
		}
		st, err := q.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st.Scheduled != 3 || st.Cancelled != 1 || st.Fired != 0 || st.Overdue != 2 {
			t.Fatalf("Stats = %+v", st)
		}
		// Stored due times are rounded up to the microsecond, so the age
		// may be up to 1 µs under 3 s.
		if !st.EarliestDue.Equal(ceilMicros(now.Add(-3*time.Second))) || st.OldestOverdueAge < 3*time.Second-time.Microsecond {
			t.Fatalf("Stats earliest/age = %v / %v", st.EarliestDue, st.OldestOverdueAge)
		}
	})
}

func TestListPagesInDueOrder(t *testing.T) {
	redistest.ForEachAll(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		q := newQueue(t, b, queue.Options{})
		base := time.Now().Add(-time.Minute).Truncate(time.Millisecond)
		// Ties at one due time, mixed states.
		var want []string
		for i := range 25 {
			id := fmt.Sprintf("L%02d", i)
			due := base.Add(time.Duration(i/5) * time.Hour)
			if _, err := q.Schedule(ctx, id, due, nil); err != nil {
				t.Fatal(err)
			}
			want = append(want, id)
		}
		claimAll(t, q) // L00-L04 were due: fired
		if _, err := q.Cancel(ctx, "L07"); err != nil {
			t.Fatal(err)
		}
		if layout2() {
			// Layout 2 lists the scheduled timers by due time, then the
			// fired and the cancelled ones each by the time they settled.
			settled := func(ids []string, at func(queue.Timer) time.Time) []string {
				ts := make([]queue.Timer, len(ids))
				for i, id := range ids {
					tm, err := q.Get(ctx, id)
					if err != nil {
						t.Fatal(err)
					}
					ts[i] = tm
				}
				slices.SortStableFunc(ts, func(a, b queue.Timer) int { return at(a).Compare(at(b)) })
				out := make([]string, len(ts))
				for i, tm := range ts {
					out[i] = tm.ID
				}
				return out
			}
			want = append(slices.Concat(want[5:7], want[8:]), settled(want[:5], func(tm queue.Timer) time.Time { return tm.FiredAt })...)
			want = append(want, "L07")
		}
		var got []string
		cursor := ""
		for pages := 0; ; pages++ {
			page, err := q.List(ctx, queue.ListOptions{Limit: 3, Cursor: cursor})
			if err != nil {
				t.Fatal(err)
			}
			for _, tm := range page.Timers {
				got = append(got, tm.ID)
			}
			if page.NextCursor == "" {
				break
			}
			cursor = page.NextCursor
			if pages > 20 {
				t.Fatal("List does not terminate")
			}
		}
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Fatalf("List order\n got %v\nwant %v", got, want)
		}
		fired, err := q.List(ctx, queue.ListOptions{State: queue.StateFired})
		firstFired := "L00"
		if layout2() {
			firstFired = want[len(want)-6]
		}
		if err != nil || len(fired.Timers) != 5 || fired.Timers[0].ID != firstFired || fired.Timers[0].State != queue.StateFired {
			t.Fatalf("fired list = %+v, %v", fired, err)
		}
		window, err := q.List(ctx, queue.ListOptions{State: queue.StateScheduled, DueFrom: base.Add(time.Hour), DueTo: base.Add(2 * time.Hour)})
		if err != nil || len(window.Timers) != 9 { // L05-L14 less the cancelled L07
			t.Fatalf("window = %+v, %v", window, err)
		}
		if _, err := q.List(ctx, queue.ListOptions{Cursor: "garbage"}); !errors.Is(err, queue.ErrInvalidOptions) {
			t.Fatalf("bad cursor = %v", err)
		}
	})
}

func TestBadInputWritesNothing(t *testing.T) {
	redistest.ForEachAll(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		q := newQueue(t, b, queue.Options{MaxPayloadBytes: 10})
		ok := time.Now().Add(time.Hour)
		cases := []struct {
			name string
			tm   queue.NewTimer
			want error
		}{
			{"empty ID", queue.NewTimer{ID: "", Due: ok}, queue.ErrInvalidID},
			{"long ID", queue.NewTimer{ID: strings.Repeat("x", 257), Due: ok}, queue.ErrInvalidID},
			{"control ID", queue.NewTimer{ID: "a\nb", Due: ok}, queue.ErrInvalidID},
			{"invalid UTF-8", queue.NewTimer{ID: "a\xffb", Due: ok}, queue.ErrInvalidID},
			{"zero due", queue.NewTimer{ID: "a"}, queue.ErrInvalidDue},
			{"pre-1970", queue.NewTimer{ID: "a", Due: time.Date(1969, 12, 31, 0, 0, 0, 0, time.UTC)}, queue.ErrInvalidDue},
			{"after 9999", queue.NewTimer{ID: "a", Due: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}, queue.ErrInvalidDue},
			{"big payload", queue.NewTimer{ID: "a", Due: ok, Payload: make([]byte, 11)}, queue.ErrPayloadTooLarge},
		}
		for _, c := range cases {
			_, err := q.Schedule(ctx, c.tm.ID, c.tm.Due, c.tm.Payload)
			if !errors.Is(err, c.want) {
				t.Errorf("%s: err = %v, want %v", c.name, err, c.want)
			}
			// In a batch, one bad item keeps the good ones out too.
			_, err = q.ScheduleBatch(ctx, []queue.NewTimer{{ID: "good", Due: ok}, c.tm})
			if !errors.Is(err, c.want) || !strings.Contains(err.Error(), "batch item 1") {
				t.Errorf("%s in a batch: err = %v", c.name, err)
			}
		}
		for _, err := range []error{
			func() error { _, err := q.Get(ctx, ""); return err }(),
			func() error { _, err := q.Cancel(ctx, "a\x00"); return err }(),
			func() error { _, err := q.Reschedule(ctx, "a", time.Time{}); return err }(),
			func() error { _, err := q.Engine().Claim(ctx, 0); return err }(),
			func() error { _, err := q.Engine().Claim(ctx, queue.MaxBatch+1); return err }(),
			func() error { _, _, err := q.Engine().Purge(ctx, -1); return err }(),
			func() error { _, err := q.List(ctx, queue.ListOptions{Limit: -1}); return err }(),
			func() error { _, err := q.List(ctx, queue.ListOptions{State: "done"}); return err }(),
			q.Wait(ctx, ""),
		} {
			if err == nil {
				t.Errorf("an invalid call succeeded")
			}
		}
		if keys := nsKeys(t, b, q); len(keys) != 0 {
			t.Fatalf("bad input wrote keys %v", keys)
		}
	})
}

func TestWrongTypeKeyIsReportedAndNothingWritten(t *testing.T) {
	redistest.ForEachAll(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		q := newQueue(t, b, queue.Options{})
		due := shardKeys(t, q, "x")[0]
		if err := b.Client.Set(ctx, due, "not a zset", 0).Err(); err != nil {
			t.Fatal(err)
		}
		_, err := q.Schedule(ctx, "x", time.Now(), nil)
		if !errors.Is(err, queue.ErrWrongType) || !strings.Contains(err.Error(), due) {
			t.Fatalf("Schedule over a string key: %v", err)
		}
		if _, err := q.Engine().Claim(ctx, 10); !errors.Is(err, queue.ErrWrongType) {
			t.Fatalf("Claim over a string key: %v", err)
		}
		if keys := nsKeys(t, b, q); len(keys) != 1 {
			t.Fatalf("keys = %v, want only the foreign one", keys)
		}
		if err := b.Client.Del(ctx, due).Err(); err != nil {
			t.Fatal(err)
		}
		if err := b.Client.Set(ctx, shardKeys(t, q, "x")[1], "x", 0).Err(); err != nil {
			t.Fatal(err)
		}
		if _, err := q.Get(ctx, "x"); !errors.Is(err, queue.ErrWrongType) {
			t.Fatalf("Get over a string hash key: %v", err)
		}
	})
}

// A key a later layout retired holds its marker (docs/redis-layout.md,
// "Layout versions"): this build refuses every call that meets it with
// ErrLayout, whose fix is to upgrade the binary (never to delete the key),
// and writes nothing, on every backend.
func TestRetiredLayoutStopsThisBuild(t *testing.T) {
	redistest.ForEachAll(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		q := newQueue(t, b, queue.Options{})
		due := shardKeys(t, q, "x")[0]
		marker := keyspace.LayoutMarker(keyspace.Layout + 1)
		if err := b.Client.Set(ctx, due, marker, 0).Err(); err != nil {
			t.Fatal(err)
		}
		check := func(what string, err error) {
			t.Helper()
			if !errors.Is(err, queue.ErrLayout) || !errors.Is(err, queue.ErrWrongType) {
				t.Fatalf("%s over a retired due set: %v, want ErrLayout", what, err)
			}
			for _, want := range []string{due, "layout 2", "upgrade it", "do not delete"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("%s: %v, want it to say %q", what, err, want)
				}
			}
			if strings.Contains(err.Error(), "remove those keys") {
				t.Errorf("%s: %v tells the user to remove the marker", what, err)
			}
		}
		_, err := q.Schedule(ctx, "x", time.Now(), nil)
		check("Schedule", err)
		_, err = q.Engine().Claim(ctx, 10)
		check("Claim", err)
		_, err = q.Cancel(ctx, "x")
		check("Cancel", err)
		_, err = q.Get(ctx, "x")
		check("Get", err)
		if keys := nsKeys(t, b, q); len(keys) != 1 {
			t.Fatalf("keys = %v, want only the marker", keys)
		}
		if v, err := b.Client.Get(ctx, due).Result(); err != nil || v != marker {
			t.Fatalf("the marker is now %q (%v)", v, err)
		}
	})
}

func TestNewRejectsBadOptions(t *testing.T) {
	_, c := redistest.Mini(t)
	if _, err := queue.New(nil, queue.Options{}); !errors.Is(err, queue.ErrNilClient) {
		t.Errorf("nil client: %v", err)
	}
	for _, o := range []queue.Options{
		{Namespace: "has space"},
		{Namespace: "brace{"},
		{Namespace: strings.Repeat("n", 65)},
	} {
		if _, err := queue.New(c, o); !errors.Is(err, queue.ErrInvalidNamespace) {
			t.Errorf("%+v: %v", o, err)
		}
	}
	for _, o := range []queue.Options{
		{MaxPayloadBytes: -1},
		{MaxPayloadBytes: queue.MaxPayloadLimit + 1},
		{Retention: -time.Second},
		{StreamMaxLen: -2},
		{RecheckInterval: -time.Second},
	} {
		if _, err := queue.New(c, o); !errors.Is(err, queue.ErrInvalidOptions) {
			t.Errorf("%+v: %v", o, err)
		}
	}
	q, err := queue.New(c, queue.Options{})
	if err != nil || q.Namespace() != queue.DefaultNamespace || q.Options().Retention != queue.DefaultRetention {
		t.Fatalf("zero Options: %v, %+v", err, q.Options())
	}
}

func TestDeriveIDIsPinned(t *testing.T) {
	// Changing these breaks every replaying caller: never update them.
	for _, c := range []struct {
		exec string
		step uint64
		want string
	}{
		{"order-42", 0, "1fd946b2-c26b-8a97-b19e-7a0f6dc0ec7b"},
		{"order-42", 1, "bc62e4cd-649d-8c8d-8ad1-b0fb618ae142"},
		{"", 0, "d583c932-1d0e-813c-9f96-71be420cd4de"},
	} {
		if got := queue.DeriveID(c.exec, c.step); got != c.want {
			t.Errorf("DeriveID(%q, %d) = %s, want %s", c.exec, c.step, got, c.want)
		}
	}
	if queue.DeriveID("a", 12) == queue.DeriveID("a1", 2) {
		t.Error("DeriveID is ambiguous across the execution/step boundary")
	}
	if err := queue.ValidateID(queue.DeriveID("x", 1)); err != nil {
		t.Error(err)
	}
}

var _ redis.UniversalClient = (*redis.Client)(nil)
