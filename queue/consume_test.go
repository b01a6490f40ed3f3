package queue_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/timerq/timerq/internal/keyspace"
	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/queue"
)

// consumeAsync runs Consume until the returned stop is called, which waits
// for it to return and checks that it returned nil.
func consumeAsync(t *testing.T, q *queue.Queue, group, consumer string, h func(context.Context, queue.Event) error, o queue.ConsumeOptions) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- q.Consume(ctx, group, consumer, h, o) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Consume(%s) = %v, want nil", consumer, err)
				}
			case <-time.After(5 * time.Second):
				t.Errorf("Consume(%s) did not return within 5s of cancellation", consumer)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// fireN schedules n timers already due and claims them.
func fireN(t *testing.T, q *queue.Queue, prefix string, n int) {
	t.Helper()
	var batch []queue.NewTimer
	for i := range n {
		batch = append(batch, queue.NewTimer{ID: fmt.Sprint(prefix, i), Due: time.Now().Add(-time.Second), Payload: []byte("p-" + fmt.Sprint(i))})
	}
	if _, err := q.ScheduleBatch(context.Background(), batch); err != nil {
		t.Fatal(err)
	}
	if got := claimAll(t, q); len(got) != n {
		t.Fatalf("claimed %d, want %d", len(got), n)
	}
}

// userGroups leaves out of an XINFO GROUPS reply the groups blocked
// Lease calls wait in (keyspace.WakeGroup).
func userGroups(gs []redis.XInfoGroup) []redis.XInfoGroup {
	return slices.DeleteFunc(gs, func(g redis.XInfoGroup) bool { return strings.HasPrefix(g.Name, keyspace.WakeGroupPrefix) })
}

func waitUntil(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	redistest.Eventually(t, d, what, cond)
}

// pendingIn counts group's unacknowledged deliveries over every shard
// stream.
func pendingIn(t *testing.T, b *redistest.Backend, q *queue.Queue, group string) int64 {
	t.Helper()
	ctx := context.Background()
	shards, err := q.Inspect().Shards(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for k := range shards {
		pend, err := b.Client.XPending(ctx, q.Keys().Stream(k), group).Result()
		if err != nil {
			t.Fatal(err)
		}
		n += pend.Count
	}
	return n
}

func TestConsumeDeliversEveryEventOnce(t *testing.T) {
	t.Parallel() // its own namespace on each backend; see docs/development.md, "Loops"
	redistest.ForEachAll(t, func(t *testing.T, b *redistest.Backend) {
		q := newQueue(t, b, queue.Options{})
		const n = 300
		fireN(t, q, "e", n/2) // before the group exists: the group starts at 0
		var mu sync.Mutex
		seen := map[string]queue.Event{}
		dups := 0
		h := func(_ context.Context, ev queue.Event) error {
			mu.Lock()
			defer mu.Unlock()
			if _, ok := seen[ev.ID]; ok {
				dups++
			}
			seen[ev.ID] = ev
			return nil
		}
		o := queue.ConsumeOptions{Block: 50 * time.Millisecond}
		consumeAsync(t, q, "g", "c1", h, o)
		consumeAsync(t, q, "g", "c2", h, o)
		fireN(t, q, "f", n/2)
		waitUntil(t, 5*time.Second, "every event", func() bool { mu.Lock(); defer mu.Unlock(); return len(seen) == n })
		// Every delivery acknowledged: nothing is left to deliver again, so
		// a duplicate would have shown by now.
		waitUntil(t, 5*time.Second, "every event acknowledged", func() bool { return pendingIn(t, b, q, "g") == 0 })
		mu.Lock()
		defer mu.Unlock()
		if dups != 0 {
			t.Errorf("%d duplicate deliveries without any failure", dups)
		}
		ev := seen["e7"]
		if string(ev.Payload) != "p-7" || ev.Attempt != 1 || ev.StreamID == "" || ev.FiredAt.Before(ev.Due) || ev.Due.IsZero() {
			t.Errorf("event e7 = %+v", ev)
		}
		shards, _ := q.Inspect().Shards(context.Background())
		for k := range shards {
			pend, err := b.Client.XPending(context.Background(), q.Keys().Stream(k), "g").Result()
			if err != nil || pend.Count != 0 {
				t.Errorf("XPENDING = %+v, %v; want nothing pending after every handler returned nil", pend, err)
			}
		}
	})
}

// TestConsumeRedeliversFromKilledConsumer: a consumer is stopped mid-handler
// (its ctx cancelled, no ack); another consumer reclaims the event after
// ClaimIdle, as delivery 2, and no event is lost.
func TestConsumeRedeliversFromKilledConsumer(t *testing.T) {
	t.Parallel() // its own namespace on each backend; see docs/development.md, "Loops"
	redistest.ForEachAll(t, func(t *testing.T, b *redistest.Backend) {
		q := newQueue(t, b, queue.Options{})
		o := queue.ConsumeOptions{ClaimIdle: 300 * time.Millisecond, Block: 50 * time.Millisecond}
		entered := make(chan string, 100)
		stopA := consumeAsync(t, q, "g", "a", func(ctx context.Context, ev queue.Event) error {
			entered <- ev.ID
			<-ctx.Done() // hangs until "killed"
			return ctx.Err()
		}, o)
		fireN(t, q, "k", 1)
		select {
		case <-entered:
		case <-time.After(5 * time.Second):
			t.Fatal("consumer a never got the event")
		}
		stopA()

		var mu sync.Mutex
		var got []queue.Event
		killedAt := time.Now()
		consumeAsync(t, q, "g", "b", func(_ context.Context, ev queue.Event) error {
			mu.Lock()
			defer mu.Unlock()
			got = append(got, ev)
			return nil
		}, o)
		fireN(t, q, "n", 5)
		waitUntil(t, 5*time.Second, "the reclaimed event and the new ones", func() bool { mu.Lock(); defer mu.Unlock(); return len(got) == 6 })
		mu.Lock()
		defer mu.Unlock()
		var reclaimed *queue.Event
		for i := range got {
			if got[i].ID == "k0" {
				reclaimed = &got[i]
			}
		}
		switch {
		case reclaimed == nil:
			t.Fatalf("k0 was not redelivered; got %+v", got)
		case reclaimed.Attempt != 2:
			t.Errorf("redelivered k0 has Attempt %d, want 2", reclaimed.Attempt)
		}
		if d := time.Since(killedAt); d < o.ClaimIdle/2 {
			t.Errorf("redelivered after %v, before ClaimIdle %v", d, o.ClaimIdle)
		}
	})
}

// TestConsumeDeadLetters: a handler failing on one event gets it MaxAttempts
// times, then it lands in the dead-letter stream, acknowledged; the other
// events are unaffected.
func TestConsumeDeadLetters(t *testing.T) {
	redistest.ForEachAll(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		q := newQueue(t, b, queue.Options{})
		var mu sync.Mutex
		attempts := map[string][]int{}
		boom := errors.New("boom: cannot handle poison")
		o := queue.ConsumeOptions{MaxAttempts: 3, RetryDelay: 20 * time.Millisecond, ClaimIdle: 5 * time.Second, Block: 20 * time.Millisecond}
		consumeAsync(t, q, "g", "c", func(_ context.Context, ev queue.Event) error {
			mu.Lock()
			defer mu.Unlock()
			attempts[ev.ID] = append(attempts[ev.ID], ev.Attempt)
			if ev.ID == "x1" {
				return boom
			}
			return nil
		}, o)
		fireN(t, q, "x", 3)
		var dead []map[string]any
		x1 := shardKeys(t, q, "x1")
		k1, _ := q.Inspect().ShardOf(ctx, "x1")
		deadKey := q.Keys().DeadLetter(k1)
		waitUntil(t, 5*time.Second, "a dead letter", func() bool {
			msgs, err := b.Client.XRange(ctx, deadKey, "-", "+").Result()
			if err != nil {
				t.Fatal(err)
			}
			dead = nil
			for _, m := range msgs {
				dead = append(dead, m.Values)
			}
			return len(dead) > 0
		})
		// Dead-lettered and acknowledged: nothing is left to attempt again,
		// so a 4th attempt or a 2nd dead letter would have shown by now.
		waitUntil(t, 5*time.Second, "every event acknowledged", func() bool { return pendingIn(t, b, q, "g") == 0 })
		mu.Lock()
		defer mu.Unlock()
		if fmt.Sprint(attempts["x1"]) != "[1 2 3]" {
			t.Errorf("poison attempts = %v, want [1 2 3]", attempts["x1"])
		}
		if fmt.Sprint(attempts["x0"], attempts["x2"]) != "[1] [1]" {
			t.Errorf("healthy events attempts = %v %v", attempts["x0"], attempts["x2"])
		}
		if n, _ := b.Client.XLen(ctx, deadKey).Result(); n != 1 {
			t.Fatalf("%d dead letters, want 1", n)
		}
		d := dead[0]
		if d["id"] != "x1" || d["payload"] != "p-1" || d["error"] != boom.Error() || d["attempts"] != "3" || d["group"] != "g" || d["stream_id"] == "" || d["due"] == "" || d["fired"] == "" {
			t.Errorf("dead letter = %v", d)
		}
		pend, err := b.Client.XPending(ctx, x1[5], "g").Result()
		if err != nil || pend.Count != 0 {
			t.Errorf("XPENDING = %+v, %v; the dead-lettered event should be acknowledged", pend, err)
		}
	})
}

// TestConsumeResumesOwnPending: a consumer restarted under the same name
// retries what it left unacknowledged at once, without waiting for
// ClaimIdle.
func TestConsumeResumesOwnPending(t *testing.T) {
	redistest.ForEachAll(t, func(t *testing.T, b *redistest.Backend) {
		q := newQueue(t, b, queue.Options{})
		o := queue.ConsumeOptions{ClaimIdle: time.Hour, Block: 20 * time.Millisecond}
		var first atomic.Int32
		stop := consumeAsync(t, q, "g", "same", func(context.Context, queue.Event) error {
			first.Add(1)
			return errors.New("fail once")
		}, o)
		fireN(t, q, "r", 1)
		waitUntil(t, 5*time.Second, "the first delivery", func() bool { return first.Load() >= 1 })
		stop()
		got := make(chan queue.Event, 10)
		consumeAsync(t, q, "g", "same", func(_ context.Context, ev queue.Event) error { got <- ev; return nil }, o)
		select {
		case ev := <-got:
			if ev.ID != "r0" || ev.Attempt < 2 {
				t.Errorf("resumed event = %+v, want r0 with Attempt >= 2", ev)
			}
		case <-time.After(3 * time.Second):
			t.Fatal("restarted consumer did not retry its own pending event")
		}
	})
}

func TestConsumeValidatesArguments(t *testing.T) {
	_, rdb := redistest.Mini(t)
	q, err := queue.New(rdb, queue.Options{Namespace: "v"})
	if err != nil {
		t.Fatal(err)
	}
	h := func(context.Context, queue.Event) error { return nil }
	ctx := context.Background()
	for _, tc := range []struct {
		group, consumer string
		h               func(context.Context, queue.Event) error
		o               queue.ConsumeOptions
	}{
		{"", "c", h, queue.ConsumeOptions{}},
		{"g", "", h, queue.ConsumeOptions{}},
		{"g g", "c", h, queue.ConsumeOptions{}},
		{"g", "c\n", h, queue.ConsumeOptions{}},
		{"g", string(make([]byte, 129)), h, queue.ConsumeOptions{}},
		{"g", "c", nil, queue.ConsumeOptions{}},
		{"g", "c", h, queue.ConsumeOptions{MaxAttempts: -1}},
		{"g", "c", h, queue.ConsumeOptions{ClaimIdle: time.Second, RetryDelay: 2 * time.Second}},
	} {
		if err := q.Consume(ctx, tc.group, tc.consumer, tc.h, tc.o); !errors.Is(err, queue.ErrInvalidOptions) {
			t.Errorf("Consume(%q, %q, %+v) = %v, want ErrInvalidOptions", tc.group, tc.consumer, tc.o, err)
		}
	}
}

// TestConsumeCount: Consume takes up to ConsumeOptions.Count events at a
// time: while its handler holds the first, the consumer holds exactly
// Count deliveries, and every event is handled once.
func TestConsumeCount(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) { testConsumeCount(t, b, false) })
}

// TestConsumeCountUnderFlowPolicies: Count holds in a namespace with flow
// policies as without (it once fell back to one event at a time).
func TestConsumeCountUnderFlowPolicies(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) { testConsumeCount(t, b, true) })
}

func testConsumeCount(t *testing.T, b *redistest.Backend, flow bool) {
	q := newQueue(t, b, queue.Options{})
	const n, count = 10, 3
	if flow {
		// A bound far above the test's load: the policy's presence is what
		// is under test, not its limits.
		putFlow(t, q, queue.FlowPolicy{Key: "k", Rate: 1000, Period: time.Millisecond, MaxInFlight: 100})
		fireFlow(t, q, "k", n)
	} else {
		fireN(t, q, "k", n)
	}
	entered := make(chan string, n)
	release := make(chan struct{})
	consumeAsync(t, q, "g", "c", func(ctx context.Context, ev queue.Event) error {
		entered <- ev.ID
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}, queue.ConsumeOptions{Count: count, ClaimIdle: 10 * time.Second, Block: 20 * time.Millisecond,
		OnError: func(err error) { t.Errorf("consume: %v", err) }})
	recv(t, entered, 1)
	// The batch was taken before its first event reached the handler.
	if got := pendingIn(t, b, q, "g"); got != count {
		t.Fatalf("%d deliveries pending while the handler holds the first, want Count %d", got, count)
	}
	close(release)
	recv(t, entered, n-1)
	waitUntil(t, 5*time.Second, "every event acknowledged", func() bool { return pendingIn(t, b, q, "g") == 0 })
}

// TestConsumeReportsSkips: occurrences skipped under OverlapSkip are
// reported to OnSkip, naming the pending occurrence they yield to.
func TestConsumeReportsSkips(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) { testConsumeReportsSkips(t, b, false) })
}

// TestConsumeReportsSkipsUnderFlowPolicies: OnSkip is told of skips in a
// namespace with flow policies as without (it once was not).
func TestConsumeReportsSkipsUnderFlowPolicies(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) { testConsumeReportsSkips(t, b, true) })
}

func testConsumeReportsSkips(t *testing.T, b *redistest.Backend, flow bool) {
	ctx := context.Background()
	q := newQueue(t, b, queue.Options{})
	if _, _, err := q.Recurring().Put(ctx, queue.Recurring{ID: "s", Every: time.Hour, Overlap: queue.OverlapSkip}); err != nil {
		t.Fatal(err)
	}
	if flow {
		putFlow(t, q, queue.FlowPolicy{Key: "k", Rate: 1000, Period: time.Millisecond, MaxInFlight: 100})
	}
	fireOcc(t, q, "s", 1, 2, 3)
	fireN(t, q, "plain", 1)
	rec := &overlapRecorder{}
	consumeAsync(t, q, "g", "c", rec.handle, queue.ConsumeOptions{Block: 20 * time.Millisecond, OnSkip: rec.onSkip,
		OnError: func(err error) { t.Errorf("consume: %v", err) }})
	waitUntil(t, 5*time.Second, "all four handled or skipped", func() bool { return rec.settled() == 4 })
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if fmt.Sprint(rec.handled) != "[s@1 plain0]" {
		t.Fatalf("handled %v, want [s@1 plain0]", rec.handled)
	}
	var s1 string
	for i, sk := range rec.skips {
		if want := fmt.Sprint("s@", i+2); sk.Event.ID != want || sk.Schedule != "s" || sk.Event.Attempt != 1 || sk.Pending == "" {
			t.Fatalf("skip %d = %+v, want %s of schedule s, attempt 1, naming the pending occurrence", i, sk, want)
		}
		if s1 == "" {
			s1 = sk.Pending
		}
		if sk.Pending != s1 {
			t.Fatalf("skips name pending %s and %s, want s@1's entry both times", s1, sk.Pending)
		}
	}
	if c, err := q.Inspect().Counters(ctx); err != nil || c.OverlapSkipped != 2 {
		t.Fatalf("Counters.OverlapSkipped = %d, %v; want 2", c.OverlapSkipped, err)
	}
}

// TestConsumeResumesAfterCrash: a consumer that died holding deliveries
// (here: leased, never settled) and restarts under the same name handles
// them at once, as their next attempt, without waiting for ClaimIdle.
func TestConsumeResumesAfterCrash(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		q := newQueue(t, b, queue.Options{})
		fireN(t, q, "r", 2)
		if ds := lease(t, q, "g", "same", queue.LeaseOptions{Lease: time.Hour}); len(ds) != 2 {
			t.Fatalf("leased %d, want 2", len(ds))
		}
		got := make(chan queue.Event, 10)
		consumeAsync(t, q, "g", "same", func(_ context.Context, ev queue.Event) error { got <- ev; return nil },
			queue.ConsumeOptions{ClaimIdle: time.Hour, Block: 20 * time.Millisecond})
		for range 2 {
			select {
			case ev := <-got:
				if ev.Attempt != 2 {
					t.Errorf("resumed %s as attempt %d, want 2", ev.ID, ev.Attempt)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("the restarted consumer did not resume what it held")
			}
		}
	})
}

// TestConsumeGroupStart: a group that Consume creates with StartNow gets
// only the fires that come after its creation.
func TestConsumeGroupStart(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		q := newQueue(t, b, queue.Options{})
		fireN(t, q, "old", 3)
		got := make(chan string, 10)
		consumeAsync(t, q, "g", "c", func(_ context.Context, ev queue.Event) error { got <- ev.ID; return nil },
			queue.ConsumeOptions{Start: queue.StartNow, Block: 20 * time.Millisecond})
		waitUntil(t, 5*time.Second, "the group's creation", func() bool {
			gs, err := b.Client.XInfoGroups(context.Background(), q.Keys().Stream(0)).Result()
			return err == nil && len(userGroups(gs)) == 1
		})
		fireN(t, q, "new", 2)
		// The old fires come first in the stream: had the group started
		// at the oldest, they would be handed over first.
		for i := range 2 {
			select {
			case id := <-got:
				if id != fmt.Sprint("new", i) {
					t.Fatalf("handled %s, want new%d: the group started before its creation", id, i)
				}
			case <-time.After(5 * time.Second):
				t.Fatalf("new%d was not handled", i)
			}
		}
	})
}

// TestConsumeAcknowledgesInBatches: Consume makes no round trip per event
// to acknowledge it. Fast handlers' acknowledgements go together, those
// handled while one round trip is under way in the next, so 256 events in
// leases of 16 take far fewer round trips with XACKs than events (about
// two a lease); every event is still acknowledged, and before Consume
// returns. Counted by a hook on the client.
func TestConsumeAcknowledgesInBatches(t *testing.T) {
	redistest.Require(t)
	srv := redistest.Start(t, redistest.Config{})
	rdb := srv.Client(t)
	acks := &ackTrips{}
	rdb.AddHook(acks)
	b := &redistest.Backend{Name: "real", Client: rdb, Real: srv}
	q := newQueue(t, b, queue.Options{})
	const n = 256
	fireN(t, q, "e", n)
	var handled atomic.Int64
	all := make(chan struct{})
	stop := consumeAsync(t, q, "g", "c", func(context.Context, queue.Event) error {
		if handled.Add(1) == n {
			close(all)
		}
		return nil
	}, queue.ConsumeOptions{Count: 16, Block: 50 * time.Millisecond})
	select {
	case <-all:
	case <-time.After(30 * time.Second):
		t.Fatalf("handled %d of %d events in 30 s", handled.Load(), n)
	}
	stop() // returns once the acknowledgements went through
	if p := pendingIn(t, b, q, "g"); p != 0 {
		t.Fatalf("%d events pending after Consume returned: every handler returned nil", p)
	}
	// One per event would be 256; batched, about 2 per lease of 16 (32).
	if trips := acks.trips.Load(); trips > n/4 {
		t.Errorf("%d round trips acknowledged %d events: about one per event, not batches", trips, n)
	} else {
		t.Logf("%d round trips acknowledged %d events", trips, n)
	}
}

// ackTrips counts the round trips (commands or pipelines) that send an
// XACK of the client's own, not a script's.
type ackTrips struct{ trips atomic.Int64 }

func (*ackTrips) DialHook(next redis.DialHook) redis.DialHook { return next }

func (a *ackTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() == "xack" {
			a.trips.Add(1)
		}
		return next(ctx, cmd)
	}
}

func (a *ackTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if slices.ContainsFunc(cmds, func(c redis.Cmder) bool { return c.Name() == "xack" }) {
			a.trips.Add(1)
		}
		return next(ctx, cmds)
	}
}
