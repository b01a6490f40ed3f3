package queue_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/queue"
)

// deadLetters lists the namespace's dead letters by timer ID.
func deadLetters(t *testing.T, q *queue.Queue) map[string]queue.DeadLetter {
	t.Helper()
	page, err := q.Deliveries().DeadLetters(context.Background(), queue.DeadLetterListOptions{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]queue.DeadLetter{}
	for _, dl := range page.DeadLetters {
		out[dl.Event.ID] = dl
	}
	return out
}

// deadlineCount is the namespace's count of deadline dead letters.
func deadlineCount(t *testing.T, q *queue.Queue) int64 {
	t.Helper()
	c, err := q.Inspect().Counters(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return c.DeadlineDeadLetters
}

// scheduleAndFire schedules timers and fires them all.
func scheduleAndFire(t *testing.T, q *queue.Queue, timers ...queue.NewTimer) {
	t.Helper()
	if _, err := q.ScheduleBatch(context.Background(), timers); err != nil {
		t.Fatal(err)
	}
	if got := claimAll(t, q); len(got) != len(timers) {
		t.Fatalf("claimed %d, want %d", len(got), len(timers))
	}
}

// TestLeaseDeadLettersFiresPastTheirDeadline: a consumer group's Lease
// hands out no fire whose deadline the server's clock is past: it is
// dead-lettered with the reason deadline, acknowledged and counted, while
// fires within their deadline, and fires without one, are handed out as
// usual.
func TestLeaseDeadLettersFiresPastTheirDeadline(t *testing.T) {
	redistest.ForEachAll(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		freezeMini(b)
		q := newQueue(t, b, queue.Options{})
		now := serverNow(t, b)
		due := now.Add(-time.Minute).Truncate(time.Millisecond)
		within := now.Add(time.Hour).Truncate(time.Millisecond)
		scheduleAndFire(t, q,
			queue.NewTimer{ID: "late", Due: due, Payload: []byte("l"), FireWithin: time.Second, Owner: "wf"},
			queue.NewTimer{ID: "within", Due: due, Payload: []byte("w"), FireBy: within},
			queue.NewTimer{ID: "labelled", Due: due, Payload: []byte("k"), Labels: map[string]string{"k": "v"}},
			queue.NewTimer{ID: "plain", Due: due, Payload: []byte("p")})
		o := queue.LeaseOptions{Lease: 10 * time.Second}
		told := tellDeadLetters(&o)
		ds := lease(t, q, "g", "c", o)
		if got := fmt.Sprint(timerIDs(ds)); got != "[labelled plain within]" {
			t.Fatalf("leased %s, want [labelled plain within]: late is past its deadline", got)
		}
		for _, d := range ds {
			if d.Event.ID == "within" && (!d.Event.Deadline.Equal(within) || d.PastDeadline(0) || !d.PastDeadline(2*time.Hour)) {
				t.Errorf("within: Deadline %v, PastDeadline(0) %v, PastDeadline(2h) %v; want %v, false, true",
					d.Event.Deadline, d.PastDeadline(0), d.PastDeadline(2*time.Hour), within)
			}
			if d.Event.ID != "within" && (!d.Event.Deadline.IsZero() || d.PastDeadline(24*time.Hour)) {
				t.Errorf("%s: Deadline %v, PastDeadline %v; it has none", d.Event.ID, d.Event.Deadline, d.PastDeadline(24*time.Hour))
			}
		}
		dead := deadLetters(t, q)
		dl, ok := dead["late"]
		if !ok || len(dead) != 1 {
			t.Fatalf("dead letters %v, want late alone", dead)
		}
		if !strings.HasPrefix(dl.Error, queue.ReasonDeadline+": not handed out") || dl.Attempts != 0 || dl.Group != "g" ||
			dl.Consumer != "" || dl.FireStreamID == "" || string(dl.Event.Payload) != "l" || dl.Event.Owner != "wf" ||
			!dl.Event.Deadline.Equal(due.Add(time.Second)) {
			t.Fatalf("dead letter %+v; want reason deadline, 0 attempts, group g, no consumer, the fire's fields", dl)
		}
		checkTold(t, *told, "late", dl, true, 1)
		o.OnDeadLetter = nil
		if n := pendingIn(t, b, q, "g"); n != 3 {
			t.Fatalf("%d pending, want the 3 handed out: the dead letter is acknowledged", n)
		}
		if n := deadlineCount(t, q); n != 1 {
			t.Fatalf("Counters.DeadlineDeadLetters = %d, want 1", n)
		}
		if _, err := q.Ack(ctx, "g", deliveryIDs(ds)...); err != nil {
			t.Fatal(err)
		}
		if again := lease(t, q, "g", "c", o); len(again) != 0 {
			t.Fatalf("leased %v after everything was settled", timerIDs(again))
		}
		// Each group decides for itself: another group dead-letters it too.
		if other := lease(t, q, "h", "c", o); fmt.Sprint(timerIDs(other)) != "[labelled plain within]" {
			t.Fatalf("group h leased %v", timerIDs(other))
		}
		if n := deadlineCount(t, q); n != 2 {
			t.Fatalf("Counters.DeadlineDeadLetters = %d after group h, want 2", n)
		}
	})
}

// TestLeaseDeadLettersReclaimsPastTheirDeadline: a fire leased in time
// whose lease ran out after its deadline is not handed to the next
// consumer: it is dead-lettered, naming the consumer whose lease ran out.
func TestLeaseDeadLettersReclaimsPastTheirDeadline(t *testing.T) {
	t.Parallel() // its own namespace on each backend; see docs/development.md, "Loops"
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		freezeMini(b)
		q := newQueue(t, b, queue.Options{})
		now := serverNow(t, b)
		due := now.Add(-time.Second)
		deadline := now.Add(3 * time.Second).Truncate(time.Millisecond)
		scheduleAndFire(t, q,
			queue.NewTimer{ID: "r", Due: due, Payload: []byte("r"), FireBy: deadline},
			queue.NewTimer{ID: "n", Due: due, Payload: []byte("n")})
		o := queue.LeaseOptions{Lease: 100 * time.Millisecond}
		if ds := lease(t, q, "g", "c", o); fmt.Sprint(timerIDs(ds)) != "[n r]" {
			t.Fatalf("leased %v, want [n r] within the deadline", timerIDs(ds))
		}
		passTo(t, b, deadline.Add(time.Millisecond))
		told := tellDeadLetters(&o)
		ds := lease(t, q, "g", "c2", o)
		if len(ds) != 1 || ds[0].Event.ID != "n" || ds[0].Event.Attempt != 2 {
			t.Fatalf("reclaimed %+v, want n alone as attempt 2", ds)
		}
		dl, ok := deadLetters(t, q)["r"]
		if !ok || !strings.HasPrefix(dl.Error, queue.ReasonDeadline+": not handed out") || dl.Consumer != "c" || dl.Attempts != 1 {
			t.Fatalf("dead letter %+v (found %v); want reason deadline, consumer c, 1 attempt", dl, ok)
		}
		checkTold(t, *told, "r", dl, true, 2)
		if n := deadlineCount(t, q); n != 1 {
			t.Fatalf("Counters.DeadlineDeadLetters = %d, want 1", n)
		}
	})
}

// TestReleasePastDeadlineDeadLetters: a release whose redelivery would
// come past the fire's deadline dead-letters it instead, with the reason
// deadline and the consumer's error; one within it is a retry as usual;
// ReleaseOptions.PastDeadline is a consumer's own verdict, counted alike.
func TestReleasePastDeadlineDeadLetters(t *testing.T) {
	t.Parallel() // its own namespace on each backend; see docs/development.md, "Loops"
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		freezeMini(b)
		q := newQueue(t, b, queue.Options{})
		now := serverNow(t, b)
		due := now.Add(-time.Second)
		scheduleAndFire(t, q,
			queue.NewTimer{ID: "r", Due: due, Payload: []byte("r"), FireBy: now.Add(time.Minute)},
			queue.NewTimer{ID: "v", Due: due, Payload: []byte("v")})
		o := queue.LeaseOptions{Lease: 2 * time.Minute}
		ds := lease(t, q, "g", "c", o)
		if fmt.Sprint(timerIDs(ds)) != "[r v]" {
			t.Fatalf("leased %v", timerIDs(ds))
		}
		byID := map[string]queue.Delivery{}
		for _, d := range ds {
			byID[d.Event.ID] = d
		}
		rel, err := q.Release(ctx, "g", byID["r"].DeliveryID, queue.ReleaseOptions{Delay: time.Millisecond, Error: "boom"}, o)
		if err != nil || rel.DeadLetterID != "" || rel.PastDeadline {
			t.Fatalf("Release within the deadline = %+v, %v; want a retry", rel, err)
		}
		passTo(t, b, rel.RedeliverAt)
		again := lease(t, q, "g", "c", o)
		if len(again) != 1 || again[0].Event.ID != "r" || again[0].Event.Attempt != 2 {
			t.Fatalf("after the retry's delay leased %+v, want r as attempt 2", again)
		}
		rel, err = q.Release(ctx, "g", again[0].DeliveryID, queue.ReleaseOptions{Delay: 2 * time.Minute, Error: "boom"}, o)
		if err != nil || rel.DeadLetterID == "" || !rel.PastDeadline || !rel.RedeliverAt.IsZero() {
			t.Fatalf("Release past the deadline = %+v, %v; want a dead letter for the deadline", rel, err)
		}
		rel, err = q.Release(ctx, "g", byID["v"].DeliveryID, queue.ReleaseOptions{PastDeadline: true, Error: "deadline: mine"}, o)
		if err != nil || rel.DeadLetterID == "" || !rel.PastDeadline {
			t.Fatalf("Release with PastDeadline = %+v, %v; want a dead letter for the deadline", rel, err)
		}
		dead := deadLetters(t, q)
		if dl := dead["r"]; !strings.HasPrefix(dl.Error, queue.ReasonDeadline+": a redelivery at") || !strings.HasSuffix(dl.Error, "; last error: boom") ||
			dl.Attempts != 2 || dl.Consumer != "c" {
			t.Errorf("dead letter of r %+v; want reason deadline, the error boom, 2 attempts, consumer c", dl)
		}
		if dl := dead["v"]; dl.Error != "deadline: mine" || dl.Attempts != 1 {
			t.Errorf("dead letter of v %+v; want the caller's error", dl)
		}
		if n := pendingIn(t, b, q, "g"); n != 0 {
			t.Fatalf("%d pending, want 0", n)
		}
		if n := deadlineCount(t, q); n != 2 {
			t.Fatalf("Counters.DeadlineDeadLetters = %d, want 2", n)
		}
	})
}

// TestDeliveryServerNowIsNeverBehind: the estimate of the server's clock
// that a delivery carries is never behind the server's clock read after it
// was handed out.
func TestDeliveryServerNowIsNeverBehind(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		q := newQueue(t, b, queue.Options{})
		fireN(t, q, "s", 1)
		ds := lease(t, q, "g", "c", queue.LeaseOptions{})
		if len(ds) != 1 {
			t.Fatalf("leased %d, want 1", len(ds))
		}
		for range 3 {
			srv := serverNow(t, b)
			if est := ds[0].ServerNow(); est.Before(srv) {
				t.Fatalf("ServerNow %v is behind the server's clock %v", est, srv)
			}
			time.Sleep(5 * time.Millisecond)
		}
	})
}

// TestLeaseLeavesDeadlineDeathsPendingWhenItCannotWriteThem: a new fire
// past its deadline that the lease cannot dead-letter, the dead-letter
// stream holding another type, is neither handed out nor lost: it stays
// pending, and the lease that would reclaim it names the key and writes
// nothing.
func TestLeaseLeavesDeadlineDeathsPendingWhenItCannotWriteThem(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		freezeMini(b)
		q := newQueue(t, b, queue.Options{})
		now := serverNow(t, b)
		due := now.Add(-time.Minute)
		scheduleAndFire(t, q,
			queue.NewTimer{ID: "late", Due: due, Payload: []byte("l"), FireWithin: time.Second},
			queue.NewTimer{ID: "plain", Due: due, Payload: []byte("p")})
		dead := q.Keys().DeadLetter(0)
		if err := b.Client.Set(ctx, dead, "not a stream", 0).Err(); err != nil {
			t.Fatal(err)
		}
		o := queue.LeaseOptions{Lease: 100 * time.Millisecond}
		ds := lease(t, q, "g", "c", o)
		if fmt.Sprint(timerIDs(ds)) != "[plain]" {
			t.Fatalf("leased %v, want [plain]", timerIDs(ds))
		}
		if n := pendingIn(t, b, q, "g"); n != 2 {
			t.Fatalf("%d pending, want 2: late stays pending", n)
		}
		passLease(t, b, ds[0].LeaseExpires.Add(time.Millisecond))
		// The keys and the group's pending entries: who holds each, how
		// often delivered.
		state := func() string {
			pel, err := b.Client.XPendingExt(ctx, &redis.XPendingExtArgs{Stream: q.Keys().Stream(0), Group: "g", Start: "-", End: "+", Count: 10}).Result()
			if err != nil {
				t.Fatal(err)
			}
			s := redistest.Digest(t, b.Client, q.Namespace())
			for _, p := range pel {
				s += fmt.Sprintf("pending %s %s %d\n", p.ID, p.Consumer, p.RetryCount)
			}
			return s
		}
		before := state()
		_, err := q.Lease(ctx, "g", "c2", o)
		if err == nil || !strings.Contains(err.Error(), dead) {
			t.Fatalf("Lease reclaiming it = %v, want an error naming %s", err, dead)
		}
		if after := state(); after != before {
			t.Fatalf("the refused lease wrote:\n%s\nthen\n%s", before, after)
		}
		if n := deadlineCount(t, q); n != 0 {
			t.Fatalf("Counters.DeadlineDeadLetters = %d, want 0", n)
		}
	})
}

// TestLeaseDeadLettersParkedFiresPastTheirDeadline: a fire that flow
// control parked in time and whose deadline passed while it waited for a
// slot is not handed out when its flow has room again: it is
// dead-lettered for its deadline.
func TestLeaseDeadLettersParkedFiresPastTheirDeadline(t *testing.T) {
	t.Parallel() // its own namespace on each backend; see docs/development.md, "Loops"
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		freezeMini(b)
		q := newQueue(t, b, queue.Options{})
		putFlow(t, q, queue.FlowPolicy{Key: "k", Rate: 1000, Period: time.Millisecond, MaxInFlight: 1})
		now := serverNow(t, b)
		due := now.Add(-time.Second)
		deadline := now.Add(3 * time.Second).Truncate(time.Millisecond)
		scheduleAndFire(t, q,
			queue.NewTimer{ID: "first", Due: due, Payload: []byte("1"), FlowKey: "k"},
			queue.NewTimer{ID: "second", Due: due.Add(time.Millisecond), Payload: []byte("2"), FlowKey: "k", FireBy: deadline})
		o := queue.LeaseOptions{Lease: 10 * time.Second}
		ds := lease(t, q, "g", "c", o)
		if fmt.Sprint(timerIDs(ds)) != "[first]" {
			t.Fatalf("leased %v, want [first]: second is parked behind it", timerIDs(ds))
		}
		passTo(t, b, deadline.Add(time.Millisecond))
		if _, err := q.Ack(ctx, "g", ds[0].DeliveryID); err != nil {
			t.Fatal(err)
		}
		told := tellDeadLetters(&o)
		if again := lease(t, q, "g", "c", o); len(again) != 0 {
			t.Fatalf("leased %v past second's deadline", timerIDs(again))
		}
		dl, ok := deadLetters(t, q)["second"]
		if !ok || !strings.HasPrefix(dl.Error, queue.ReasonDeadline+": not handed out") {
			t.Fatalf("dead letter %+v (found %v); want second's, reason deadline", dl, ok)
		}
		checkTold(t, *told, "second", dl, true, 1)
		if n := pendingIn(t, b, q, "g"); n != 0 {
			t.Fatalf("%d pending, want 0", n)
		}
		if n := deadlineCount(t, q); n != 1 {
			t.Fatalf("Counters.DeadlineDeadLetters = %d, want 1", n)
		}
	})
}

// TestLeaseWithoutTheRightToCountLeavesDeadlineDeathsPending: a Redis user
// without +hincrby (an application line older than deadlines) leases as
// before; a new fire past its deadline, which it cannot count, stays
// pending, neither handed out nor dead-lettered, and the lease that would
// reclaim it is refused naming +hincrby before it writes anything; with
// the right, that lease dead-letters and counts it.
func TestLeaseWithoutTheRightToCountLeavesDeadlineDeathsPending(t *testing.T) {
	srv, admin, app, ns := appUser(t, "+hincrby")
	ctx := context.Background()
	b := &redistest.Backend{Name: "real", Client: admin, Real: srv}
	adminQ := newQueue(t, b, queue.Options{Namespace: ns})
	due := time.Now().Add(-time.Minute)
	scheduleAndFire(t, adminQ, queue.NewTimer{ID: "late", Due: due, FireWithin: time.Second}, queue.NewTimer{ID: "plain", Due: due})
	q, err := queue.New(app, queue.Options{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	o := queue.LeaseOptions{Lease: 100 * time.Millisecond}
	ds, err := q.Lease(ctx, "g", "c", o)
	if err != nil || fmt.Sprint(timerIDs(ds)) != "[plain]" {
		t.Fatalf("Lease = %v, %v; want plain alone", timerIDs(ds), err)
	}
	if n := pendingIn(t, b, adminQ, "g"); n != 2 {
		t.Fatalf("%d pending, want 2: late stays pending", n)
	}
	if n := deadlineCount(t, adminQ); n != 0 || len(deadLetters(t, adminQ)) != 0 {
		t.Fatalf("dead-lettered or counted (%d) without the right to count", n)
	}
	redistest.AwaitServerTime(t, admin, ds[0].LeaseExpires.Add(time.Millisecond))
	before := redistest.Digest(t, admin, ns)
	if _, err := q.Lease(ctx, "g", "c", o); !errors.Is(err, queue.ErrPermission) || !strings.Contains(err.Error(), "+hincrby") {
		t.Fatalf("Lease reclaiming = %v, want ErrPermission naming +hincrby", err)
	}
	if after := redistest.Digest(t, admin, ns); after != before {
		t.Fatalf("the refused lease wrote:\n%s\nthen\n%s", before, after)
	}
	if err := admin.Do(ctx, "ACL", "SETUSER", "timerq-app-"+ns, "+hincrby").Err(); err != nil {
		t.Fatal(err)
	}
	if ds, err := q.Lease(ctx, "g", "c", o); err != nil || fmt.Sprint(timerIDs(ds)) != "[plain]" {
		t.Fatalf("Lease with the right = %v, %v; want plain again", timerIDs(ds), err)
	}
	if dl, ok := deadLetters(t, adminQ)["late"]; !ok || !strings.HasPrefix(dl.Error, "deadline: ") || deadlineCount(t, adminQ) != 1 {
		t.Fatalf("dead letter %+v (found %v), count %d; want late's, counted", dl, ok, deadlineCount(t, adminQ))
	}
}

// tellDeadLetters sets o.OnDeadLetter to one that collects what it is told.
func tellDeadLetters(o *queue.LeaseOptions) *[]queue.LeaseDeadLetter {
	var told []queue.LeaseDeadLetter
	o.OnDeadLetter = func(d queue.LeaseDeadLetter) { told = append(told, d) }
	return &told
}

// checkTold checks that a Lease call told OnDeadLetter of timer id's fire,
// and of nothing else: the dead letter dl, for its deadline or not, as the
// attempt it would have been.
func checkTold(t *testing.T, told []queue.LeaseDeadLetter, id string, dl queue.DeadLetter, pastDeadline bool, attempt int) {
	t.Helper()
	if len(told) != 1 {
		t.Fatalf("OnDeadLetter told of %d fires (%+v), want %s alone", len(told), told, id)
	}
	d := told[0]
	if d.Event.ID != id || d.DeadLetterID != dl.Event.StreamID || d.PastDeadline != pastDeadline || d.Cause != dl.Error ||
		d.Event.Attempt != attempt || d.Event.StreamID != dl.FireStreamID || d.Event.Owner != dl.Event.Owner ||
		!d.Event.Deadline.Equal(dl.Event.Deadline) || d.At.IsZero() || d.DeliveryID == "" {
		t.Fatalf("OnDeadLetter told %+v; want %s's dead letter %s (fire %s), PastDeadline %v, cause %q, attempt %d, its owner and deadline",
			d, id, dl.Event.StreamID, dl.FireStreamID, pastDeadline, dl.Error, attempt)
	}
}

// TestLeaseReplyKeepsFlowPopsNext: flow_pop.lua's reply {now, next, {},
// entries...} may hand back a parked fire already past its deadline,
// which Go dead-letters. next, when the shard's other parked fires are
// ready, must survive it: a Lease that lost it waited up to a second
// (leasePoll) for fires that were ready long before.
func TestLeaseReplyKeepsFlowPopsNext(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		q := newQueue(t, b, queue.Options{})
		now := serverNow(t, b).UnixMilli()
		// A deadline of 1,000 ms after the epoch: long past.
		entry := []any{"1-0", "1", "id", "x", "due", "1000", "fired", "1000", "meta", "0\x1f1000\x1f"}
		n, next, settled, err := queue.LeaseReply(ctx, q, "g", []any{now, "12345", []any{}, entry})
		if err != nil || n != 0 || !settled || next != "12345" {
			t.Fatalf("leaseReply = %d handed out, next %q, settled %v, %v; want 0, 12345, true", n, next, settled, err)
		}
	})
}

// TestFireWithinPastTheLastTimeIsTheLastTime: a FireWithin that puts the
// deadline past the end of 9999, the latest time a record holds, stores
// that end instead; the timer reads back, and lists, like any other.
// (A larger number was stored, which every later read refused as a
// malformed record, List's whole page with it.)
func TestFireWithinPastTheLastTimeIsTheLastTime(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		q := newQueue(t, b, queue.Options{})
		due := time.Date(9999, 12, 1, 0, 0, 0, 0, time.UTC)
		if _, err := q.ScheduleBatch(ctx, []queue.NewTimer{{ID: "far", Due: due, FireWithin: 60 * 24 * time.Hour}}); err != nil {
			t.Fatalf("ScheduleBatch: %v", err)
		}
		last := time.Date(9999, 12, 31, 23, 59, 59, 999e6, time.UTC)
		if tm, err := q.Get(ctx, "far"); err != nil || !tm.Deadline.Equal(last) {
			t.Fatalf("Get = deadline %v, %v; want %v", tm.Deadline, err, last)
		}
		if page, err := q.List(ctx, queue.ListOptions{}); err != nil || len(page.Timers) != 1 {
			t.Fatalf("List = %+v, %v", page, err)
		}
	})
}
