package queue_test

import (
	"context"
	"crypto/sha1"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/timerq/timerq/internal/keyspace"
	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/queue"
	sched "github.com/timerq/timerq/schedule"
	"github.com/timerq/timerq/scripts/lua"
)

// fireOcc fires timers with occurrence IDs of schedule sid at once, as the
// schedule's own arming would an hour from now: the consumer side only
// sees the IDs.
func fireOcc(t *testing.T, q *queue.Queue, sid string, nominals ...int64) {
	t.Helper()
	// Restored, as an import would: Schedule refuses an occurrence's ID,
	// and Restore takes one only while its schedule exists.
	var batch []queue.Timer
	past := time.Now().Add(-time.Second)
	for _, n := range nominals {
		batch = append(batch, queue.Timer{ID: queue.OccurrenceID(sid, time.UnixMilli(n)), State: queue.StateScheduled,
			Due: past, CreatedAt: past, Payload: []byte(sid)})
	}
	if _, err := q.Restore(context.Background(), batch); err != nil {
		t.Fatal(err)
	}
	if got := claimAll(t, q); len(got) != len(nominals) {
		t.Fatalf("claimed %d, want %d", len(got), len(nominals))
	}
}

// overlapRecorder collects what a group's handlers got and what it skipped.
type overlapRecorder struct {
	mu      sync.Mutex
	handled []string
	skips   []queue.Skip
}

// handle is a Consume handler that records what it is handed.
func (r *overlapRecorder) handle(_ context.Context, ev queue.Event) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.handled = append(r.handled, ev.ID)
	return nil
}

// settled counts the events handled or skipped.
func (r *overlapRecorder) settled() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.handled) + len(r.skips)
}

func (r *overlapRecorder) sawHandled(id string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Contains(r.handled, id)
}

func (r *overlapRecorder) skipped() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, s := range r.skips {
		out = append(out, s.Event.ID)
	}
	return out
}

func (r *overlapRecorder) onSkip(s queue.Skip) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.skips = append(r.skips, s)
}

func pendingIDs(t *testing.T, b *redistest.Backend, q *queue.Queue, group string) []string {
	t.Helper()
	pend, err := b.Client.XPendingExt(context.Background(), &redis.XPendingExtArgs{Stream: q.Keys().Stream(0), Group: group, Start: "-", End: "+", Count: 100}).Result()
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, p := range pend {
		ids = append(ids, p.ID)
	}
	return ids
}

// TestOverlapSkipWhilePreviousPending: under OverlapSkip, an occurrence
// delivered while the group has the schedule's previous one pending is
// acknowledged unhandled, counted and reported; under OverlapAllow it is
// handled; once the previous is acknowledged the next one is handled; and
// each group decides for itself.
func TestOverlapSkipWhilePreviousPending(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		q := newQueue(t, b, queue.Options{})
		for _, r := range []queue.Recurring{
			{ID: "s", Every: time.Hour, Overlap: queue.OverlapSkip},
			{ID: "a", Every: time.Hour}, // allow, the default
		} {
			if _, _, err := q.Recurring().Put(ctx, r); err != nil {
				t.Fatal(err)
			}
		}
		if got := getRec(t, q, "a").Overlap; got != queue.OverlapAllow {
			t.Fatalf("default Overlap = %q, want allow", got)
		}
		// s@1 and a@1 block their handler until released.
		release := make(chan struct{})
		entered := make(chan string, 10)
		rec := &overlapRecorder{}
		h := func(ctx context.Context, ev queue.Event) error {
			if ev.ID == "s@1" || ev.ID == "a@1" {
				entered <- ev.ID
				select {
				case <-release:
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			rec.mu.Lock()
			rec.handled = append(rec.handled, ev.ID)
			rec.mu.Unlock()
			return nil
		}
		o := queue.ConsumeOptions{Block: 20 * time.Millisecond, OnSkip: rec.onSkip}
		// Three consumers: two are held by s@1 and a@1, the third reads on.
		for _, c := range []string{"c1", "c2", "c3"} {
			consumeAsync(t, q, "g", c, h, o)
		}
		// Another group handles everything at once: it never overlaps. It
		// reads one event at a time: in a batch holding s@1 and s@2 (its
		// read lagging behind two fires), s@1 is pending when s@2 is
		// checked, and skip rightly skips s@2; that made the namespace's
		// counter read 2 at load 3.
		other := &overlapRecorder{}
		consumeAsync(t, q, "other", "o1", func(_ context.Context, ev queue.Event) error {
			other.mu.Lock()
			defer other.mu.Unlock()
			other.handled = append(other.handled, ev.ID)
			return nil
		}, queue.ConsumeOptions{Block: 20 * time.Millisecond, Count: 1, OnSkip: other.onSkip})

		// One at a time, so that each is read by a consumer of its own.
		for _, sid := range []string{"s", "a"} {
			fireOcc(t, q, sid, 1)
			select {
			case <-entered:
			case <-time.After(5 * time.Second):
				t.Fatalf("%s@1 was not delivered", sid)
			}
		}
		fireOcc(t, q, "s", 2)
		fireOcc(t, q, "a", 2)
		// a@2 is acknowledged after its handler returned, so wait for the
		// pending list too: only s@1 and a@1, held by their handlers.
		waitUntil(t, 5*time.Second, "a@2 handled and acknowledged, and s@2 skipped", func() bool {
			return rec.sawHandled("a@2") && len(rec.skipped()) == 1 && len(pendingIDs(t, b, q, "g")) == 2
		})
		if got := rec.skipped(); !slices.Equal(got, []string{"s@2"}) {
			t.Fatalf("skipped %v, want [s@2]", got)
		}
		rec.mu.Lock()
		sk := rec.skips[0]
		rec.mu.Unlock()
		pend := pendingIDs(t, b, q, "g")
		if sk.Schedule != "s" || string(sk.Event.Payload) != "s" || sk.Event.Attempt != 1 || len(pend) != 2 || !slices.Contains(pend, sk.Pending) {
			t.Fatalf("skip %+v, pending %v: want schedule s, naming the pending s@1", sk, pend)
		}
		if slices.Contains(pend, sk.Event.StreamID) {
			t.Fatalf("the skipped s@2 (%s) is still pending: %v", sk.Event.StreamID, pend)
		}
		if c, err := q.Inspect().Counters(ctx); err != nil || c.OverlapSkipped != 1 {
			t.Fatalf("Counters.OverlapSkipped = %d, %v; want 1", c.OverlapSkipped, err)
		}

		close(release) // s@1 and a@1 are acknowledged
		waitUntil(t, 5*time.Second, "s@1 handled", func() bool { return rec.sawHandled("s@1") && rec.sawHandled("a@1") })
		waitUntil(t, 5*time.Second, "nothing pending", func() bool { return len(pendingIDs(t, b, q, "g")) == 0 })
		fireOcc(t, q, "s", 3)
		waitUntil(t, 5*time.Second, "s@3 handled after s@1 was acknowledged", func() bool { return rec.sawHandled("s@3") })

		waitUntil(t, 5*time.Second, "the other group to handle all five", func() bool {
			other.mu.Lock()
			defer other.mu.Unlock()
			return len(other.handled) == 5
		})
		other.mu.Lock()
		defer other.mu.Unlock()
		if len(other.skips) != 0 {
			t.Errorf("the other group, which never had anything pending, skipped %+v", other.skips)
		}
	})
}

// TestOverlapSkipWithinOneRead: occurrences read in one batch were all
// delivered together, so under skip only the first is handled; with allow
// all are; plain timers between them are untouched.
func TestOverlapSkipWithinOneRead(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		q := newQueue(t, b, queue.Options{})
		if _, _, err := q.Recurring().Put(ctx, queue.Recurring{ID: "s", Every: time.Hour, Overlap: queue.OverlapSkip}); err != nil {
			t.Fatal(err)
		}
		if _, _, err := q.Recurring().Put(ctx, queue.Recurring{ID: "a", Every: time.Hour, Overlap: queue.OverlapAllow}); err != nil {
			t.Fatal(err)
		}
		fireOcc(t, q, "s", 1, 2, 3)
		fireOcc(t, q, "a", 1, 2)
		fireN(t, q, "plain", 2)
		rec := &overlapRecorder{}
		consumeAsync(t, q, "g", "c", rec.handle, queue.ConsumeOptions{Block: 20 * time.Millisecond, OnSkip: rec.onSkip})
		waitUntil(t, 5*time.Second, "all seven settled", func() bool { return rec.settled() == 7 })
		rec.mu.Lock()
		defer rec.mu.Unlock()
		var skipped []string
		for _, s := range rec.skips {
			skipped = append(skipped, s.Event.ID)
		}
		if fmt.Sprint(rec.handled) != "[s@1 a@1 a@2 plain0 plain1]" || fmt.Sprint(skipped) != "[s@2 s@3]" {
			t.Fatalf("handled %v, skipped %v; want [s@1 a@1 a@2 plain0 plain1] and [s@2 s@3]", rec.handled, skipped)
		}
		// The group's overlap hash points at s@1's entry, and only s has a field.
		f, err := b.Client.HGetAll(ctx, keyspace.Shard(q.Namespace(), 0, 1).Overlap("g")).Result()
		if err != nil || len(f) != 1 || f["s"] == "" {
			t.Fatalf("overlap hash = %v, %v; want one field, s", f, err)
		}
	})
}

// TestOverlapSkipAfterConsumerCrash: the consumer of s@1 dies without
// acknowledging it. s@2 is skipped (s@1 is still pending: its work may be
// half done); after ClaimIdle s@1 is reclaimed and handled (attempt 2),
// and then the next occurrence is handled again.
func TestOverlapSkipAfterConsumerCrash(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		q := newQueue(t, b, queue.Options{})
		if _, _, err := q.Recurring().Put(ctx, queue.Recurring{ID: "s", Every: time.Hour, Overlap: queue.OverlapSkip}); err != nil {
			t.Fatal(err)
		}
		o := queue.ConsumeOptions{ClaimIdle: 300 * time.Millisecond, Block: 20 * time.Millisecond}
		entered := make(chan string, 10)
		stopA := consumeAsync(t, q, "g", "a", func(ctx context.Context, ev queue.Event) error {
			entered <- ev.ID
			<-ctx.Done() // hangs until "killed"
			return ctx.Err()
		}, o)
		fireOcc(t, q, "s", 1)
		select {
		case <-entered:
		case <-time.After(5 * time.Second):
			t.Fatal("consumer a never got s@1")
		}
		stopA()

		rec := &overlapRecorder{}
		attempts := map[string]int{}
		o.OnSkip = rec.onSkip
		fireOcc(t, q, "s", 2)
		consumeAsync(t, q, "g", "b", func(_ context.Context, ev queue.Event) error {
			rec.mu.Lock()
			defer rec.mu.Unlock()
			rec.handled = append(rec.handled, ev.ID)
			attempts[ev.ID] = ev.Attempt
			return nil
		}, o)
		waitUntil(t, 5*time.Second, "s@1 reclaimed and handled", func() bool { return rec.sawHandled("s@1") })
		if got := rec.skipped(); !slices.Equal(got, []string{"s@2"}) {
			t.Fatalf("skipped %v, want [s@2]: s@1 was pending with the dead consumer", got)
		}
		rec.mu.Lock()
		if attempts["s@1"] != 2 || slices.Contains(rec.handled, "s@2") {
			t.Errorf("handled %v with attempts %v; want s@1 as attempt 2 and never s@2", rec.handled, attempts)
		}
		rec.mu.Unlock()
		fireOcc(t, q, "s", 3)
		waitUntil(t, 5*time.Second, "s@3 handled", func() bool { return rec.sawHandled("s@3") })
	})
}

// TestOverlapPolicyChangeAndDelete: switching a schedule to allow hands
// over what skip would have skipped, and drops its field from the group's
// overlap hash; deleting it does too.
func TestOverlapPolicyChangeAndDelete(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		q := newQueue(t, b, queue.Options{})
		r := queue.Recurring{ID: "s", Every: time.Hour, Overlap: queue.OverlapSkip}
		if _, _, err := q.Recurring().Put(ctx, r); err != nil {
			t.Fatal(err)
		}
		ovKey := keyspace.Shard(q.Namespace(), 0, 1).Overlap("g")
		rec := &overlapRecorder{}
		consume := func() (stop func()) {
			return consumeAsync(t, q, "g", "c", rec.handle, queue.ConsumeOptions{Block: 20 * time.Millisecond, OnSkip: rec.onSkip})
		}
		fireOcc(t, q, "s", 1, 2)
		stop := consume()
		waitUntil(t, 5*time.Second, "s@1 handled", func() bool { return rec.sawHandled("s@1") && len(rec.skipped()) == 1 })
		stop()
		if n, _ := b.Client.HLen(ctx, ovKey).Result(); n != 1 {
			t.Fatalf("overlap hash has %d fields, want 1", n)
		}
		r.Overlap = queue.OverlapAllow
		if info, err := q.Recurring().Update(ctx, r); err != nil || info.Overlap != queue.OverlapAllow {
			t.Fatalf("UpdateRecurring = %+v, %v", info.Overlap, err)
		}
		fireOcc(t, q, "s", 3, 4)
		consume()
		waitUntil(t, 5*time.Second, "s@3 and s@4 handled", func() bool { return rec.sawHandled("s@3") && rec.sawHandled("s@4") })
		if n, _ := b.Client.HLen(ctx, ovKey).Result(); n != 0 {
			t.Fatalf("overlap hash keeps %d fields for a schedule that allows overlap", n)
		}
	})
}

// TestOverlapCostsNothingForPlainTimers: a read of plain timers runs no
// overlap script, and one of occurrences runs one per read, not per
// occurrence. (The read itself is a script, lease.lua, which is not
// counted.)
func TestOverlapCostsNothingForPlainTimers(t *testing.T) {
	m, _ := redistest.Mini(t)
	var mu sync.Mutex
	scripts := 0
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
	t.Cleanup(func() { rdb.Close() })
	rdb.AddHook(scriptCounter{lua.Overlap, func() { mu.Lock(); scripts++; mu.Unlock() }})
	ctx := context.Background()
	admin, err := queue.New(redis.NewClient(&redis.Options{Addr: m.Addr()}), queue.Options{Namespace: "cost"})
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	q, err := queue.New(rdb, queue.Options{Namespace: "cost"})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	if _, _, err := admin.Recurring().Put(ctx, queue.Recurring{ID: "a", Every: time.Hour}); err != nil {
		t.Fatal(err)
	}
	fireN(t, admin, "plain", 10)
	handled := make(chan string, 100)
	stop := consumeAsync(t, q, "g", "c", func(_ context.Context, ev queue.Event) error { handled <- ev.ID; return nil },
		queue.ConsumeOptions{Block: 20 * time.Millisecond})
	recv(t, handled, 10)
	mu.Lock()
	if scripts != 0 {
		t.Errorf("consuming 10 plain timers ran %d scripts, want 0", scripts)
	}
	mu.Unlock()
	stop()
	fireOcc(t, admin, "a", 1, 2, 3, 4, 5)
	consumeAsync(t, q, "g", "c", func(_ context.Context, ev queue.Event) error { handled <- ev.ID; return nil },
		queue.ConsumeOptions{Block: 20 * time.Millisecond})
	recv(t, handled, 5)
	mu.Lock()
	defer mu.Unlock()
	if scripts != 1 {
		t.Errorf("consuming 5 occurrences read at once ran %d scripts, want 1", scripts)
	}
}

func recv(t *testing.T, c chan string, n int) {
	t.Helper()
	for i := range n {
		select {
		case <-c:
		case <-time.After(5 * time.Second):
			t.Fatalf("got %d of %d events", i, n)
		}
	}
}

// scriptCounter counts the runs of one script.
type scriptCounter struct {
	script *lua.Script
	hit    func()
}

func (scriptCounter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h scriptCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		// A NOSCRIPT reply to EVALSHA is followed by an EVAL, and a
		// missing function's FCALL by another: count the one that ran.
		args := cmd.Args()
		if n := cmd.Name(); (n == "evalsha" || n == "eval" || n == "fcall") && err == nil && len(args) > 1 {
			src := h.script.Source
			if a := fmt.Sprint(args[1]); a == fmt.Sprintf("%x", sha1.Sum([]byte(src))) || a == src || a == h.script.Function {
				h.hit()
			}
		}
		return err
	}
}
func (h scriptCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func TestOverlapPolicyIsValidated(t *testing.T) {
	_, rdb := redistest.Mini(t)
	q, err := queue.New(rdb, queue.Options{Namespace: "v"})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	_, _, err = q.Recurring().Put(context.Background(), queue.Recurring{ID: "x", Every: time.Hour, Overlap: "buffer"})
	if !errors.Is(err, sched.ErrInvalidSchedule) || !strings.Contains(err.Error(), "allow, skip") {
		t.Fatalf("PutRecurring with overlap buffer = %v, want ErrInvalidSchedule naming allow and skip", err)
	}
}

// TestOverlapSkipHandsOverRequeuedDeadLetters: an operator's requeue of a
// dead-lettered occurrence is a decision: it is handed over even while
// another occurrence of its skip schedule is pending.
func TestOverlapSkipHandsOverRequeuedDeadLetters(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		q := newQueue(t, b, queue.Options{})
		if _, _, err := q.Recurring().Put(ctx, queue.Recurring{ID: "s", Every: time.Hour, Overlap: queue.OverlapSkip}); err != nil {
			t.Fatal(err)
		}
		rec := &overlapRecorder{}
		release := make(chan struct{})
		entered := make(chan string, 10)
		var poisoned sync.Once
		h := func(ctx context.Context, ev queue.Event) error {
			failed := false
			if ev.ID == "s@1" {
				poisoned.Do(func() { failed = true })
			}
			if failed {
				return errors.New("poison, once")
			}
			if ev.ID == "s@2" {
				entered <- ev.ID
				select {
				case <-release:
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			rec.mu.Lock()
			defer rec.mu.Unlock()
			rec.handled = append(rec.handled, ev.ID)
			return nil
		}
		o := queue.ConsumeOptions{MaxAttempts: 1, Block: 20 * time.Millisecond, OnSkip: rec.onSkip}
		consumeAsync(t, q, "g", "c1", h, o)
		consumeAsync(t, q, "g", "c2", h, o)
		fireOcc(t, q, "s", 1)
		var dead []queue.DeadLetter
		waitUntil(t, 5*time.Second, "s@1 dead-lettered", func() bool {
			page, err := q.Deliveries().DeadLetters(ctx, queue.DeadLetterListOptions{Limit: 10})
			dead = page.DeadLetters
			return err == nil && len(dead) == 1
		})
		fireOcc(t, q, "s", 2)
		select {
		case <-entered:
		case <-time.After(5 * time.Second):
			t.Fatal("s@2 was not delivered")
		}
		if _, err := q.Deliveries().Requeue(ctx, dead[0].Event.Shard, dead[0].Event.StreamID); err != nil {
			t.Fatal(err)
		}
		waitUntil(t, 5*time.Second, "the requeued s@1 handled while s@2 is pending", func() bool { return rec.sawHandled("s@1") })
		close(release)
		if got := rec.skipped(); len(got) != 0 {
			t.Fatalf("skipped %v, want nothing", got)
		}
	})
}

// TestOverlapSkipOnShardedNamespace is a tripwire for sharded schedules:
// while a namespace of several shards refuses schedules it skips; once it
// takes them, a skip schedule's second occurrence must be skipped there
// too, which needs overlapScheduleKey (overlap.go) to name the shard's
// schedules hash.
func TestOverlapSkipOnShardedNamespace(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		ns := redistest.Namespace(t)
		if _, err := queue.CreateNamespace(ctx, b.Client, ns, 4); err != nil {
			t.Fatal(err)
		}
		q, err := queue.New(b.Client, queue.Options{Namespace: ns})
		if err != nil {
			t.Fatal(err)
		}
		defer q.Close()
		_, _, err = q.Recurring().Put(ctx, queue.Recurring{ID: "s", Every: time.Hour, Overlap: queue.OverlapSkip})
		if err != nil {
			t.Fatal(err)
		}
		fireOcc(t, q, "s", 1, 2)
		rec := &overlapRecorder{}
		consumeAsync(t, q, "g", "c", rec.handle, queue.ConsumeOptions{Block: 20 * time.Millisecond, OnSkip: rec.onSkip})
		waitUntil(t, 5*time.Second, "both settled", func() bool { return rec.settled() == 2 })
		if got := rec.skipped(); !slices.Equal(got, []string{"s@2"}) {
			t.Fatalf("skipped %v on a sharded namespace, want [s@2]", got)
		}
	})
}

// TestOverlapOfRecordsWrittenBeforeTheField: a schedule record written
// before the record had its overlap field keeps the policy in its JSON
// body ("overlap":"skip"). Such a record reads as its policy, Consume
// applies it, and the record's next write (here a pause) adds the field
// without changing the policy.
func TestOverlapOfRecordsWrittenBeforeTheField(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		q := newQueue(t, b, queue.Options{})
		schedules := keyspace.Shard(q.Namespace(), 0, 1).Schedules()
		for _, r := range []queue.Recurring{
			{ID: "s", Every: time.Hour, Overlap: queue.OverlapSkip},
			{ID: "a", Every: time.Hour},
		} {
			if _, _, err := q.Recurring().Put(ctx, r); err != nil {
				t.Fatal(err)
			}
			// Rewrite it as an older timerq wrote it.
			rec, err := b.Client.HGet(ctx, schedules, r.ID).Result()
			if err != nil {
				t.Fatal(err)
			}
			f := strings.SplitN(rec, ":", 7)
			if len(f) != 7 || f[5] != string(r.Overlap)+map[bool]string{true: "allow"}[r.Overlap == ""] {
				t.Fatalf("record %q has no overlap field %q", rec, r.Overlap)
			}
			body := f[6]
			if r.Overlap == queue.OverlapSkip {
				body = `{"overlap":"skip",` + body[1:]
			}
			old := strings.Join(f[:5], ":") + ":" + body
			if err := b.Client.HSet(ctx, schedules, r.ID, old).Err(); err != nil {
				t.Fatal(err)
			}
		}
		if got := getRec(t, q, "s").Overlap; got != queue.OverlapSkip {
			t.Fatalf("old record of s: Overlap = %q, want skip", got)
		}
		if got := getRec(t, q, "a").Overlap; got != queue.OverlapAllow {
			t.Fatalf("old record of a: Overlap = %q, want allow", got)
		}

		fireOcc(t, q, "s", 1, 2)
		fireOcc(t, q, "a", 1, 2)
		rec := &overlapRecorder{}
		consumeAsync(t, q, "g", "c", rec.handle, queue.ConsumeOptions{Block: 20 * time.Millisecond, OnSkip: rec.onSkip})
		waitUntil(t, 5*time.Second, "all four settled", func() bool { return rec.settled() == 4 })
		if got := rec.skipped(); !slices.Equal(got, []string{"s@2"}) {
			t.Fatalf("skipped %v, want [s@2]", got)
		}

		if _, err := q.Recurring().Pause(ctx, "s"); err != nil {
			t.Fatal(err)
		}
		raw, err := b.Client.HGet(ctx, schedules, "s").Result()
		if err != nil || strings.Split(raw, ":")[5] != "skip" {
			t.Fatalf("after a pause the record is %q, %v; want the overlap field skip", raw, err)
		}
		if got := getRec(t, q, "s").Overlap; got != queue.OverlapSkip {
			t.Fatalf("after a pause: Overlap = %q, want skip", got)
		}
	})
}
