package queue

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/timerq/timerq/internal/keyspace"
	"github.com/timerq/timerq/internal/redistest"
)

// gate is a go-redis hook that counts script calls and the timers they
// schedule and, while closed, holds each one until it opens.
type gate struct {
	calls atomic.Int64
	items atomic.Int64
	mu    sync.Mutex
	open  chan struct{} // nil: open
}

func (g *gate) DialHook(next redis.DialHook) redis.DialHook { return next }
func (g *gate) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			g.hold(c)
		}
		return next(ctx, cmds)
	}
}
func (g *gate) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, c redis.Cmder) error {
		g.hold(c)
		return next(ctx, c)
	}
}

func (g *gate) hold(c redis.Cmder) {
	if name := strings.ToLower(c.Name()); name != "evalsha" && name != "eval" && name != "fcall" {
		return
	}
	g.calls.Add(1)
	// EVALSHA sha numkeys KEYS... (FCALL function numkeys KEYS...) wake
	// traceparent quota (id due payload endpoint)...
	args := c.Args()
	if len(args) > 3 {
		if nk, ok := args[2].(int); ok {
			g.items.Add(int64((len(args) - 3 - nk - 3) / 4))
		}
	}
	g.mu.Lock()
	ch := g.open
	g.mu.Unlock()
	if ch != nil {
		<-ch
	}
}

func (g *gate) close() { g.mu.Lock(); g.open = make(chan struct{}); g.mu.Unlock() }
func (g *gate) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	close(g.open)
	g.open = nil
}

// coalescingQueue is a queue with CoalesceSchedules over a client of its
// own on b's server, with a gate on its script calls; its namespace has
// b.Shards shards, if set.
func coalescingQueue(t *testing.T, b *redistest.Backend) (*Queue, *gate) {
	t.Helper()
	addr := ""
	switch {
	case b.Mini != nil:
		addr = b.Mini.Addr()
	case b.Real != nil:
		addr = b.Real.Addr()
	default:
		t.Fatal("coalescingQueue: needs miniredis or a standalone server")
	}
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { rdb.Close() })
	g := &gate{}
	rdb.AddHook(g)
	ns := redistest.Namespace(t)
	if b.Shards > 0 {
		if _, err := CreateNamespace(context.Background(), rdb, ns, b.Shards); err != nil {
			t.Fatal(err)
		}
	}
	q, err := New(rdb, Options{Namespace: ns, CoalesceSchedules: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Close() })
	// Load the layout and the schedule script now, so that the gate
	// counts neither a layout read nor a NOSCRIPT retry.
	if _, err := q.ScheduleIn(context.Background(), "warm-up", time.Hour, nil); err != nil {
		t.Fatal(err)
	}
	g.calls.Store(0)
	g.items.Store(0)
	return q, g
}

// waitQueued waits until both call slots are held at the gate and the
// other callers of n in all wait behind them.
func waitQueued(t *testing.T, q *Queue, g *gate, n int) {
	t.Helper()
	redistest.Eventually(t, 10*time.Second, fmt.Sprintf("%d callers in held calls or waiting", n), func() bool {
		q.coalesce.mu.Lock()
		defer q.coalesce.mu.Unlock()
		return g.calls.Load() == maxLeaders && int64(len(q.coalesce.waiting))+g.items.Load() == int64(n)
	})
}

// holdSlots fills both call slots with a call of one timer each, held at
// the closed gate, so that the callers after them queue.
func holdSlots(t *testing.T, q *Queue, g *gate, wg *sync.WaitGroup) {
	t.Helper()
	for i := range maxLeaders {
		wg.Go(func() { _, _ = q.ScheduleIn(context.Background(), fmt.Sprintf("lead-%d", i), time.Hour, nil) })
		redistest.Eventually(t, 10*time.Second, fmt.Sprintf("call %d at the gate", i+1), func() bool {
			return g.calls.Load() == int64(i+1)
		})
	}
}

// coalesceOneEach schedules each of timers by a caller of its own, all
// queued behind the two call slots held at the closed gate, so that they
// go together in one call once the gate opens; it returns each caller's
// result and error.
func coalesceOneEach(t *testing.T, q *Queue, g *gate, timers []NewTimer) ([]ScheduleResult, []error) {
	t.Helper()
	g.close()
	var wg sync.WaitGroup
	holdSlots(t, q, g, &wg)
	res := make([]ScheduleResult, len(timers))
	errs := make([]error, len(timers))
	for i, tm := range timers {
		wg.Go(func() {
			var r []ScheduleResult
			if r, errs[i] = q.ScheduleBatch(context.Background(), []NewTimer{tm}); len(r) == 1 {
				res[i] = r[0]
			}
		})
	}
	waitQueued(t, q, g, maxLeaders+len(timers))
	if len(q.coalesce.waiting) != len(timers) {
		t.Fatalf("%d callers queued, want %d", len(q.coalesce.waiting), len(timers))
	}
	g.release()
	wg.Wait()
	return res, errs
}

// Callers that arrive while two calls are in flight go together in the
// next, and each gets its own timer's result.
func TestCoalescedSchedulesShareCalls(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		q, g := coalescingQueue(t, b)
		ctx := context.Background()
		const n = 100
		g.close()
		res := make([]ScheduleResult, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				res[i], errs[i] = q.ScheduleIn(ctx, fmt.Sprintf("c-%d", i), time.Hour, []byte(fmt.Sprint(i)))
			})
		}
		// Two calls are held at the gate; the rest queue.
		waitQueued(t, q, g, n)
		g.release()
		wg.Wait()
		for i := range n {
			if errs[i] != nil {
				t.Fatalf("caller %d: %v", i, errs[i])
			}
			want := fmt.Sprintf("c-%d", i)
			if !res[i].Created || res[i].Timer.ID != want || string(res[i].Timer.Payload) != fmt.Sprint(i) {
				t.Fatalf("caller %d got %+v, want its own new timer %s", i, res[i], want)
			}
		}
		// 2 held calls, then the rest (under 256) in one or two.
		if calls := g.calls.Load(); calls > maxLeaders+2 {
			t.Errorf("%d script calls for %d concurrent schedules, want at most %d", calls, n, maxLeaders+2)
		}
		for i := range n {
			if tm, err := q.Get(ctx, fmt.Sprintf("c-%d", i)); err != nil || tm.State != StateScheduled {
				t.Fatalf("c-%d after the calls: %+v, %v", i, tm, err)
			}
		}
	})
}

// One ID from two callers in one call is created once: one caller gets
// Created, the other the same record.
func TestCoalescedSameIDCreatedOnce(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		q, g := coalescingQueue(t, b)
		ctx := context.Background()
		g.close()
		var wg sync.WaitGroup
		holdSlots(t, q, g, &wg)
		var res [2]ScheduleResult
		var errs [2]error
		for i := range 2 {
			wg.Go(func() { res[i], errs[i] = q.ScheduleIn(ctx, "same", time.Hour, []byte(fmt.Sprint(i))) })
		}
		waitQueued(t, q, g, maxLeaders+2)
		g.release()
		wg.Wait()
		if errs[0] != nil || errs[1] != nil {
			t.Fatal(errs)
		}
		if res[0].Created == res[1].Created || res[0].Timer.CreatedAt != res[1].Timer.CreatedAt || string(res[0].Timer.Payload) != string(res[1].Timer.Payload) {
			t.Fatalf("two schedules of one ID: %+v and %+v; want one created, both the same record", res[0], res[1])
		}
	})
}

// A caller whose context ends while it waits is withdrawn: it gets the
// context's error, and its timer is never written.
func TestCoalescedWithdrawnCallerWritesNothing(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		q, g := coalescingQueue(t, b)
		ctx := context.Background()
		g.close()
		var wg sync.WaitGroup
		holdSlots(t, q, g, &wg)
		cctx, cancel := context.WithCancel(ctx)
		var err error
		wg.Go(func() { _, err = q.ScheduleIn(cctx, "withdrawn", time.Hour, nil) })
		var kept ScheduleResult
		var keptErr error
		wg.Go(func() { kept, keptErr = q.ScheduleIn(ctx, "kept", time.Hour, nil) })
		redistest.Eventually(t, 10*time.Second, "2 callers queued", func() bool {
			q.coalesce.mu.Lock()
			defer q.coalesce.mu.Unlock()
			return len(q.coalesce.waiting) == 2
		})
		cancel()
		redistest.Eventually(t, 10*time.Second, "the cancelled caller out of the queue", func() bool {
			q.coalesce.mu.Lock()
			defer q.coalesce.mu.Unlock()
			return len(q.coalesce.waiting) == 1
		})
		g.release()
		wg.Wait()
		if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "nothing was written") {
			t.Fatalf("cancelled caller: %v; want context.Canceled saying nothing was written", err)
		}
		if keptErr != nil || !kept.Created {
			t.Fatalf("the caller behind it: %+v, %v", kept, keptErr)
		}
		if _, err := q.Get(ctx, "withdrawn"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("Get(withdrawn) = %v, want ErrNotFound", err)
		}
	})
}

// A damaged record fails only the caller whose timer it is, not the
// others merged into the same call.
func TestCoalescedMalformedRecordFailsOnlyItsCaller(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		q, g := coalescingQueue(t, b)
		ctx := context.Background()
		n, err := q.Inspect().Shards(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := q.Client().HSet(ctx, keyspace.Shard(q.Namespace(), 0, n).Timers(), "bad", "junk").Err(); err != nil {
			t.Fatal(err)
		}
		g.close()
		var wg sync.WaitGroup
		holdSlots(t, q, g, &wg)
		ids := []string{"a", "bad", "c"}
		errs := make([]error, len(ids))
		for i, id := range ids {
			wg.Go(func() { _, errs[i] = q.ScheduleIn(ctx, id, time.Hour, nil) })
		}
		waitQueued(t, q, g, maxLeaders+len(ids))
		if len(q.coalesce.waiting) != len(ids) {
			t.Fatalf("%d callers queued, want %d", len(q.coalesce.waiting), len(ids))
		}
		g.release()
		wg.Wait()
		if errs[0] != nil || errs[2] != nil {
			t.Fatalf("good timers beside a damaged one: %v, %v", errs[0], errs[2])
		}
		if !errors.Is(errs[1], ErrMalformedRecord) {
			t.Fatalf("the damaged timer's caller: %v, want ErrMalformedRecord", errs[1])
		}
	})
}

// A coalesced timer that names a missing endpoint fails its caller alone;
// the timers beside it, one delivering to an endpoint that exists, are
// scheduled.
func TestCoalescedMissingEndpointFailsOnlyItsCaller(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		q, g := coalescingQueue(t, b)
		ctx := context.Background()
		secret := Secret(SecretPrefix + strings.Repeat("QUFB", 8))
		if _, err := q.Endpoints().Put(ctx, Endpoint{Name: "billing", URL: "https://billing.example.com/", Secrets: []Secret{secret}}, nil); err != nil {
			t.Fatal(err)
		}
		g.calls.Store(0) // the put is a script too
		timers := []NewTimer{
			NewTimerIn("a", time.Hour, nil),
			{ID: "b", In: time.Hour, Endpoint: "nope"},
			{ID: "c", In: time.Hour, Endpoint: "billing"},
		}
		_, errs := coalesceOneEach(t, q, g, timers)
		if errs[0] != nil || errs[2] != nil {
			t.Fatalf("good timers beside one naming a missing endpoint: %v, %v", errs[0], errs[2])
		}
		if !errors.Is(errs[1], ErrEndpointNotFound) {
			t.Fatalf("the caller naming a missing endpoint: %v, want ErrEndpointNotFound", errs[1])
		}
		if _, err := q.Get(ctx, "b"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("the refused timer: Get = %v", err)
		}
	})
}

// A coalesced timer due in a while with a FireBy before its due time,
// which the script refuses, fails its caller alone, with the FieldError
// of a lone call (item 0); the timers beside it are scheduled.
func TestCoalescedFireByBeforeRelativeDueFailsOnlyItsCaller(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		q, g := coalescingQueue(t, b)
		ctx := context.Background()
		bad := NewTimerIn("b", time.Hour, nil)
		bad.FireBy = time.Now().Add(time.Minute)
		timers := []NewTimer{NewTimerIn("a", time.Hour, nil), bad, NewTimerIn("c", time.Hour, nil)}
		_, errs := coalesceOneEach(t, q, g, timers)
		if errs[0] != nil || errs[2] != nil {
			t.Fatalf("good timers beside one with a FireBy before its due time: %v, %v", errs[0], errs[2])
		}
		var fe *FieldError
		if !errors.Is(errs[1], ErrInvalidOptions) || !errors.As(errs[1], &fe) || fe.Field != "FireBy" || fe.Item != 0 {
			t.Fatalf("the caller with a FireBy before its due time: %v, want a FieldError of FireBy, item 0", errs[1])
		}
		if _, err := q.Get(ctx, "b"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("the refused timer: Get = %v", err)
		}
	})
}

// A coalesced timer whose expected owner epoch is stale, which the script
// refuses, fails its caller alone with ErrStaleEpoch; the timers beside
// it, one of the same owner at its current epoch, are scheduled.
func TestCoalescedStaleEpochFailsOnlyItsCaller(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		q, g := coalescingQueue(t, b)
		ctx := context.Background()
		bumped, err := q.BumpEpoch(ctx, "wf", BumpOptions{})
		if err != nil {
			t.Fatal(err)
		}
		g.calls.Store(0) // the bump is a script too
		timers := []NewTimer{
			NewTimerIn("a", time.Hour, nil),
			{ID: "b", In: time.Hour, Owner: "wf", Epoch: bumped.Epoch + 6},
			{ID: "c", In: time.Hour, Owner: "wf", Epoch: bumped.Epoch},
		}
		res, errs := coalesceOneEach(t, q, g, timers)
		if errs[0] != nil || errs[2] != nil {
			t.Fatalf("good timers beside one under a stale epoch: %v, %v", errs[0], errs[2])
		}
		if !res[0].Created || !res[2].Created || res[2].Timer.Epoch != bumped.Epoch {
			t.Fatalf("good timers beside one under a stale epoch: %+v, %+v", res[0], res[2])
		}
		if !errors.Is(errs[1], ErrStaleEpoch) || errors.Is(errs[1], ErrOutcomeUnknown) {
			t.Fatalf("the caller under a stale epoch: %v, want ErrStaleEpoch", errs[1])
		}
		if _, err := q.Get(ctx, "b"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("the refused timer: Get = %v", err)
		}
	})
}

// otherShards returns n IDs of prefix that each hash to a shard of
// shards other than id's.
func otherShards(t *testing.T, id, prefix string, n, shards int) []string {
	t.Helper()
	var out []string
	for i := 0; len(out) < n && i < 1000; i++ {
		o := fmt.Sprintf("%s%d", prefix, i)
		if keyspace.ShardOf(o, shards) != keyspace.ShardOf(id, shards) {
			out = append(out, o)
		}
	}
	if len(out) < n {
		t.Fatalf("no %d IDs outside the shard of %q", n, id)
	}
	return out
}

// In a namespace of several shards a coalesced group is a call per
// shard: when the call of a timer under a stale epoch is refused, the
// timers of the other shards' calls were created, and their callers are
// told so (Created), not that their timers already existed, as a retry
// of every caller one at a time would find.
func TestCoalescedRefusalKeepsOtherShardsResults(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		b.Shards = 4
		q, g := coalescingQueue(t, b)
		good := otherShards(t, "stale", "good-", 2, b.Shards)
		timers := []NewTimer{
			NewTimerIn(good[0], time.Hour, nil),
			{ID: "stale", In: time.Hour, Owner: "wf", Epoch: 3},
			NewTimerIn(good[1], time.Hour, nil),
		}
		res, errs := coalesceOneEach(t, q, g, timers)
		if errs[0] != nil || errs[2] != nil {
			t.Fatalf("timers of other shards: %v, %v", errs[0], errs[2])
		}
		if !res[0].Created || !res[2].Created {
			t.Fatalf("timers of other shards, created by the group's call: Created %v, %v, want true",
				res[0].Created, res[2].Created)
		}
		if !errors.Is(errs[1], ErrStaleEpoch) {
			t.Fatalf("the caller under a stale epoch: %v, want ErrStaleEpoch", errs[1])
		}
	})
}

// An existing timer whose meta does not read fails its caller alone, with
// ErrMalformedRecord. Its call has created the new timers beside it, and
// their callers are told so (Created), not that they already existed.
func TestCoalescedMalformedMetaKeepsOthersResults(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		q, g := coalescingQueue(t, b)
		ctx := context.Background()
		if _, err := q.ScheduleIn(ctx, "bad", time.Hour, nil); err != nil {
			t.Fatal(err)
		}
		n, err := q.Inspect().Shards(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := q.Client().HSet(ctx, keyspace.Shard(q.Namespace(), 0, n).TimerMeta(), "bad", "junk").Err(); err != nil {
			t.Fatal(err)
		}
		g.calls.Store(0) // the schedule of "bad" is a script call too
		g.items.Store(0)
		res, errs := coalesceOneEach(t, q, g, []NewTimer{NewTimerIn("a", time.Hour, nil), NewTimerIn("bad", time.Hour, nil), NewTimerIn("c", time.Hour, nil)})
		if errs[0] != nil || errs[2] != nil || !res[0].Created || !res[2].Created {
			t.Fatalf("new timers beside one whose meta does not read: %+v %v, %+v %v", res[0], errs[0], res[2], errs[2])
		}
		if !errors.Is(errs[1], ErrMalformedRecord) {
			t.Fatalf("the caller of the timer whose meta does not read: %v, want ErrMalformedRecord", errs[1])
		}
	})
}
