package queue_test

import (
	"cmp"
	"context"
	"crypto/sha1"
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/queue"
	lua "github.com/timerq/timerq/scripts/lua"
)

// lease calls Lease and fails the test on an error.
func lease(t *testing.T, q *queue.Queue, group, consumer string, o queue.LeaseOptions) []queue.Delivery {
	t.Helper()
	ds, err := q.Lease(context.Background(), group, consumer, o)
	if err != nil {
		t.Fatalf("Lease(%s, %s): %v", group, consumer, err)
	}
	return ds
}

// timerIDs lists the deliveries' timer IDs, sorted.
func timerIDs(ds []queue.Delivery) []string {
	var ids []string
	for _, d := range ds {
		ids = append(ids, d.Event.ID)
	}
	sort.Strings(ids)
	return ids
}

func deliveryIDs(ds []queue.Delivery) []string {
	var ids []string
	for _, d := range ds {
		ids = append(ids, d.DeliveryID)
	}
	return ids
}

// freezeMini stops miniredis's clock (TIME, stream IDs, pending entries'
// idle times) at the wall clock's now, so that the test moves it with
// passTo; a real server's clock runs by itself. On the millisecond, as
// Redis keeps pending entries' times.
func freezeMini(b *redistest.Backend) {
	if b.Mini != nil {
		b.Mini.SetTime(time.Now().Truncate(time.Millisecond))
	}
}

// passTo returns once the server clock has reached at: on miniredis by
// setting it there, on a real server by waiting for it.
func passTo(t *testing.T, b *redistest.Backend, at time.Time) {
	t.Helper()
	if b.Mini != nil {
		b.Mini.SetTime(at)
		return
	}
	redistest.AwaitServerTime(t, b.Client, at)
}

// leaseSlack is how long past a delivery's LeaseExpires a test on a real
// server waits before it counts on the lease having ended. Redis measures
// a lease from the pending entry's delivery time, which Redis 7.0 takes
// from its clock as the XREADGROUP or XCLAIM runs, a moment after the TIME
// that the script reported and LeaseExpires is counted from: a lease never
// ends before LeaseExpires, but may end a little after it. On a loaded
// machine that moment exceeded a millisecond (a CI run's
// TestLeaseMaxAttemptsDeadLetters/cluster found the lease not yet ended).
const leaseSlack = 100 * time.Millisecond

// passLease is passTo for the end of a lease: on miniredis at exactly at,
// so that the tests there still check the boundary; on a real server
// leaseSlack later.
func passLease(t *testing.T, b *redistest.Backend, at time.Time) {
	t.Helper()
	if b.Mini == nil {
		at = at.Add(leaseSlack)
	}
	passTo(t, b, at)
}

func TestLeaseThenAck(t *testing.T) {
	redistest.ForEachAll(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		q := newQueue(t, b, queue.Options{})
		fireN(t, q, "a", 3)
		before := serverNow(t, b)
		o := queue.LeaseOptions{Lease: 10 * time.Second}
		ds := lease(t, q, "g", "c1", o)
		if got := fmt.Sprint(timerIDs(ds)); got != "[a0 a1 a2]" {
			t.Fatalf("leased %s, want [a0 a1 a2]", got)
		}
		for _, d := range ds {
			ref, err := queue.ParseDeliveryID(d.DeliveryID)
			if err != nil || ref.Shard != d.Event.Shard || ref.StreamID != d.Event.StreamID || ref.Attempt != 1 || d.Event.Attempt != 1 {
				t.Errorf("delivery %+v: ParseDeliveryID = %+v, %v", d, ref, err)
			}
			if string(d.Event.Payload) != "p-"+strings.TrimPrefix(d.Event.ID, "a") || d.Event.FiredAt.IsZero() {
				t.Errorf("event %+v lost its fields", d.Event)
			}
			if lo, hi := before.Add(o.Lease).Truncate(time.Millisecond), serverNow(t, b).Add(o.Lease); d.LeaseExpires.Before(lo) || d.LeaseExpires.After(hi) {
				t.Errorf("LeaseExpires %v outside [%v, %v]", d.LeaseExpires, lo, hi)
			}
		}
		// Leased, not acknowledged: nobody else gets them while the lease runs.
		if again := lease(t, q, "g", "c2", o); len(again) != 0 {
			t.Fatalf("second consumer leased %v while the leases run", timerIDs(again))
		}
		if n := pendingIn(t, b, q, "g"); n != 3 {
			t.Fatalf("%d pending, want 3", n)
		}
		acked, err := q.Ack(ctx, "g", deliveryIDs(ds)...)
		if err != nil || fmt.Sprint(acked) != "[true true true]" {
			t.Fatalf("Ack = %v, %v", acked, err)
		}
		if n := pendingIn(t, b, q, "g"); n != 0 {
			t.Fatalf("%d pending after Ack, want 0", n)
		}
		// Acknowledging twice is safe, and says so.
		acked, err = q.Ack(ctx, "g", deliveryIDs(ds)...)
		if err != nil || fmt.Sprint(acked) != "[false false false]" {
			t.Fatalf("second Ack = %v, %v", acked, err)
		}
		// Another group sees every event again.
		if other := lease(t, q, "h", "c1", o); len(other) != 3 {
			t.Fatalf("group h leased %d, want 3", len(other))
		}
	})
}

// TestLeaseExpiryRedelivers: a consumer that never acknowledges loses its
// leases, and the next Lease call of another consumer gets every event
// again, as the next attempt; the first consumer can no longer release or
// extend them, but its late Ack still counts.
func TestLeaseExpiryRedelivers(t *testing.T) {
	t.Parallel() // its own namespace on each backend; see docs/development.md, "Loops"
	redistest.ForEachAll(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		freezeMini(b)
		q := newQueue(t, b, queue.Options{})
		fireN(t, q, "e", 5)
		// The lease is also how long a lease must have been idle to be
		// taken over, so the five Lease calls below must end within it, or
		// the first ones' leases are taken over again: with 300 ms, five
		// calls over 16 shards on a loaded machine did not.
		o := queue.LeaseOptions{Lease: 1500 * time.Millisecond}
		first := lease(t, q, "g", "dies", o)
		if len(first) != 5 {
			t.Fatalf("leased %d, want 5", len(first))
		}
		expires := first[0].LeaseExpires
		for _, d := range first {
			if d.LeaseExpires.After(expires) {
				expires = d.LeaseExpires
			}
		}
		if b.Mini != nil {
			passTo(t, b, expires.Add(-time.Millisecond))
			if early := lease(t, q, "g", "other", o); len(early) != 0 {
				t.Fatalf("leased %v 1ms before the leases end", timerIDs(early))
			}
		}
		passLease(t, b, expires)
		var again []queue.Delivery
		for range 5 { // a scan visits at most 10 Count entries per call
			again = append(again, lease(t, q, "g", "other", o)...)
		}
		if got := fmt.Sprint(timerIDs(again)); got != "[e0 e1 e2 e3 e4]" {
			t.Fatalf("redelivered %s, want every event", got)
		}
		for _, d := range again {
			if d.Event.Attempt != 2 {
				t.Errorf("%s: attempt %d, want 2", d.Event.ID, d.Event.Attempt)
			}
		}
		if _, err := q.Release(ctx, "g", first[0].DeliveryID, queue.ReleaseOptions{}, o); !errors.Is(err, queue.ErrLeaseLost) {
			t.Errorf("Release of a lost lease = %v, want ErrLeaseLost", err)
		}
		if _, err := q.ExtendLease(ctx, "g", first[0].DeliveryID, 0, o); !errors.Is(err, queue.ErrLeaseLost) {
			t.Errorf("ExtendLease of a lost lease = %v, want ErrLeaseLost", err)
		}
		acked, err := q.Ack(ctx, "g", deliveryIDs(first)...)
		if err != nil || slices.Contains(acked, false) {
			t.Fatalf("late Ack = %v, %v; the work was done, so it counts", acked, err)
		}
		if n := pendingIn(t, b, q, "g"); n != 0 {
			t.Fatalf("%d pending, want 0", n)
		}
		if _, err := q.Release(ctx, "g", again[0].DeliveryID, queue.ReleaseOptions{}, o); !errors.Is(err, queue.ErrDeliveryNotFound) {
			t.Errorf("Release of an acknowledged delivery = %v, want ErrDeliveryNotFound", err)
		}
	})
}

// TestLeaseScanCoversLongPendingLists: expired leases behind many live ones
// are found, because the scan resumes where the previous call, of any
// caller, stopped (real Redis's XAUTOCLAIM looks at 10 COUNT entries).
func TestLeaseScanCoversLongPendingLists(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		freezeMini(b)
		q := newQueue(t, b, queue.Options{})
		fireN(t, q, "s", 30)
		// Leases of 3 s, the 25 extended 1 s before they end: on real
		// Redis the 25 extensions and then the 10 leases below run in
		// wall time, and a loaded machine (a helper's run at load 20)
		// took longer than the 200 and 300 ms margins a 500 ms lease left,
		// so that more leases expired than the 5.
		o := queue.LeaseOptions{Lease: 3 * time.Second, Count: 30}
		all := lease(t, q, "g", "a", o)
		if len(all) != 30 {
			t.Fatalf("leased %d, want 30", len(all))
		}
		slices.SortFunc(all, func(x, y queue.Delivery) int { return compareStreamIDs(x.Event.StreamID, y.Event.StreamID) })
		// The 25 oldest stay leased; the 5 newest expire.
		passTo(t, b, all[0].LeaseExpires.Add(-time.Second))
		for _, d := range all[:25] {
			if _, err := q.ExtendLease(ctx, "g", d.DeliveryID, 0, o); err != nil {
				t.Fatalf("ExtendLease: %v", err)
			}
		}
		passLease(t, b, all[0].LeaseExpires)
		var got []queue.Delivery
		one := o
		one.Count = 1
		for range 10 {
			got = append(got, lease(t, q, "g", "b", one)...)
		}
		want := fmt.Sprint(timerIDs(all[25:]))
		if fmt.Sprint(timerIDs(got)) != want {
			t.Fatalf("reclaimed %v, want the 5 expired %s", timerIDs(got), want)
		}
	})
}

// TestLeaseScanQuietsLongPendingLists: with more than 128 deliveries
// pending, a scan that finds no expired lease is not repeated, by any
// caller, for the lease / 10 (at most 100 ms): so the leases that run out
// meanwhile are reclaimed that much later, and then all of them.
func TestLeaseScanQuietsLongPendingLists(t *testing.T) {
	t.Parallel() // its own namespace on each backend; see docs/development.md, "Loops"
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		freezeMini(b)
		q := newQueue(t, b, queue.Options{})
		const n = 200
		fireN(t, q, "q", n)
		o := queue.LeaseOptions{Lease: time.Second, Count: n}
		all := lease(t, q, "g", "a", o)
		if len(all) != n {
			t.Fatalf("leased %d, want %d", len(all), n)
		}
		expires := all[0].LeaseExpires
		some := o
		some.Count = 50
		if b.Mini != nil { // the server's clock, to the millisecond
			passTo(t, b, expires.Add(-50*time.Millisecond))
			if got := lease(t, q, "g", "b", some); len(got) != 0 {
				t.Fatalf("leased %d before the leases end", len(got))
			}
			passTo(t, b, expires)
			if got := lease(t, q, "g", "b", some); len(got) != 0 {
				t.Fatalf("reclaimed %d while the scan is quiet (50 ms more)", len(got))
			}
		}
		passTo(t, b, expires.Add(50*time.Millisecond))
		var again []queue.Delivery
		for range n/some.Count + 1 {
			again = append(again, lease(t, q, "g", "b", some)...)
		}
		if len(again) != n || again[0].Event.Attempt != 2 {
			t.Fatalf("reclaimed %d, want all %d as attempt 2", len(again), n)
		}
	})
}

// compareStreamIDs orders stream entry IDs as Redis does.
func compareStreamIDs(a, b string) int {
	var am, as, bm, bs uint64
	fmt.Sscanf(a, "%d-%d", &am, &as)
	fmt.Sscanf(b, "%d-%d", &bm, &bs)
	if am != bm {
		return cmp.Compare(am, bm)
	}
	return cmp.Compare(as, bs)
}

func TestLeaseReleaseWithDelay(t *testing.T) {
	t.Parallel() // its own namespace on each backend; see docs/development.md, "Loops"
	redistest.ForEachAll(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		freezeMini(b)
		q := newQueue(t, b, queue.Options{})
		fireN(t, q, "r", 1)
		o := queue.LeaseOptions{Lease: 10 * time.Second}
		ds := lease(t, q, "g", "c", o)
		if len(ds) != 1 {
			t.Fatalf("leased %d, want 1", len(ds))
		}
		before := serverNow(t, b)
		delay := 400 * time.Millisecond
		rel, err := q.Release(ctx, "g", ds[0].DeliveryID, queue.ReleaseOptions{Delay: delay, Error: "busy"}, o)
		if err != nil || rel.DeadLetterID != "" {
			t.Fatalf("Release = %+v, %v", rel, err)
		}
		if lo, hi := before.Add(delay).Truncate(time.Millisecond), serverNow(t, b).Add(delay); rel.RedeliverAt.Before(lo) || rel.RedeliverAt.After(hi) {
			t.Fatalf("RedeliverAt %v outside [%v, %v]", rel.RedeliverAt, lo, hi)
		}
		if b.Mini != nil {
			passTo(t, b, rel.RedeliverAt.Add(-time.Millisecond))
		}
		// Not before RedeliverAt, by the server's clock.
		early := lease(t, q, "g", "c2", o)
		if now := serverNow(t, b); len(early) > 0 && now.Before(rel.RedeliverAt) {
			t.Fatalf("redelivered at %v, before %v", now, rel.RedeliverAt)
		}
		if b.Mini != nil && len(early) > 0 {
			t.Fatal("redelivered 1ms early")
		}
		passTo(t, b, rel.RedeliverAt)
		got := append(early, lease(t, q, "g", "c2", o)...)
		if len(got) != 1 || got[0].Event.ID != "r0" || got[0].Event.Attempt != 2 {
			t.Fatalf("after the delay got %+v, want r0 as attempt 2", got)
		}
		if _, err := q.Release(ctx, "g", got[0].DeliveryID, queue.ReleaseOptions{Delay: o.Lease + time.Millisecond}, o); !errors.Is(err, queue.ErrInvalidOptions) {
			t.Errorf("Release with a delay above the lease = %v, want ErrInvalidOptions", err)
		}
		// Released at once: the next Lease gets it.
		if _, err := q.Release(ctx, "g", got[0].DeliveryID, queue.ReleaseOptions{}, o); err != nil {
			t.Fatal(err)
		}
		if again := lease(t, q, "g", "c3", o); len(again) != 1 || again[0].Event.Attempt != 3 {
			t.Fatalf("after a release without delay got %+v, want attempt 3", again)
		}
	})
}

func TestLeaseMaxAttemptsDeadLetters(t *testing.T) {
	t.Parallel() // its own namespace on each backend; see docs/development.md, "Loops"
	redistest.ForEachAll(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		freezeMini(b)
		q := newQueue(t, b, queue.Options{})
		fireN(t, q, "d", 2)
		o := queue.LeaseOptions{Lease: 300 * time.Millisecond, MaxAttempts: 2}
		ds := lease(t, q, "g", "c", o)
		if len(ds) != 2 {
			t.Fatalf("leased %d, want 2", len(ds))
		}
		byID := map[string]queue.Delivery{}
		for _, d := range ds {
			byID[d.Event.ID] = d
		}
		// d0 fails twice by Release; d1's consumer dies twice.
		if r, err := q.Release(ctx, "g", byID["d0"].DeliveryID, queue.ReleaseOptions{Error: "boom"}, o); err != nil || r.DeadLetterID != "" {
			t.Fatalf("first Release = %+v, %v; want a retry", r, err)
		}
		passLease(t, b, byID["d1"].LeaseExpires)
		ds = lease(t, q, "g", "c", o)
		if got := fmt.Sprint(timerIDs(ds)); got != "[d0 d1]" || ds[0].Event.Attempt != 2 || ds[1].Event.Attempt != 2 {
			t.Fatalf("second round %+v, want d0 and d1 as attempt 2", ds)
		}
		for _, d := range ds {
			byID[d.Event.ID] = d
		}
		r, err := q.Release(ctx, "g", byID["d0"].DeliveryID, queue.ReleaseOptions{Error: "boom", Delay: time.Millisecond}, o)
		if err != nil || r.DeadLetterID == "" {
			t.Fatalf("last Release = %+v, %v; want a dead letter", r, err)
		}
		passLease(t, b, byID["d1"].LeaseExpires)
		o3 := o
		told := tellDeadLetters(&o3)
		if ds := lease(t, q, "g", "c2", o3); len(ds) != 0 {
			t.Fatalf("third round handed out %+v; both should be dead letters", ds)
		}
		if n := pendingIn(t, b, q, "g"); n != 0 {
			t.Fatalf("%d pending, want 0: dead letters are acknowledged", n)
		}
		page, err := q.Deliveries().DeadLetters(ctx, queue.DeadLetterListOptions{Limit: 10})
		dead := page.DeadLetters
		if err != nil || len(dead) != 2 {
			t.Fatalf("DeadLetters = %+v, %v; want 2", dead, err)
		}
		for _, dl := range dead {
			if dl.Group != "g" || dl.FireStreamID != byID[dl.Event.ID].Event.StreamID || dl.Event.FiredAt.IsZero() ||
				string(dl.Event.Payload) != "p-"+strings.TrimPrefix(dl.Event.ID, "d") {
				t.Errorf("dead letter %+v", dl)
			}
			switch dl.Event.ID {
			case "d0":
				if dl.Error != "boom" || dl.Consumer != "c" || dl.Attempts != 2 {
					t.Errorf("released dead letter: error %q consumer %q attempts %d, want boom by c at 2", dl.Error, dl.Consumer, dl.Attempts)
				}
			case "d1":
				// Reclaimed a third time, above MaxAttempts, as Consume counts,
				// by c2; the dead letter names c, whose lease ran out, as a
				// released one names the consumer that held it.
				if !strings.Contains(dl.Error, "delivered 3 times without an acknowledgement") || dl.Consumer != "c" || dl.Attempts != 3 {
					t.Errorf("expired dead letter: error %q consumer %q attempts %d", dl.Error, dl.Consumer, dl.Attempts)
				}
				// The lease that dead-lettered it says so; d0's release
				// was no Lease call's.
				checkTold(t, *told, "d1", dl, false, 3)
			}
		}
		// The dead letter's fields are Consume's, in Consume's order.
		raw, err := b.Client.XRange(ctx, q.Keys().DeadLetter(dead[0].Event.Shard), dead[0].Event.StreamID, dead[0].Event.StreamID).Result()
		if err != nil || len(raw) != 1 {
			t.Fatalf("XRANGE dead letter: %v %v", raw, err)
		}
		for _, f := range []string{"id", "due", "fired", "payload", "error", "attempts", "group", "consumer", "stream_id"} {
			if _, ok := raw[0].Values[f]; !ok {
				t.Errorf("dead letter lacks %s: %v", f, raw[0].Values)
			}
		}
		// Requeue brings it back, to this group only, as a new delivery.
		var d0 queue.DeadLetter
		for _, dl := range dead {
			if dl.Event.ID == "d0" {
				d0 = dl
			}
		}
		if _, err := q.Deliveries().Requeue(ctx, d0.Event.Shard, d0.Event.StreamID); err != nil {
			t.Fatal(err)
		}
		if other := lease(t, q, "other", "x", o); slices.Contains(timerIDs(other), "d0") && len(other) != 2 {
			t.Fatalf("group other got %v", timerIDs(other))
		} else if fmt.Sprint(timerIDs(other)) != "[d0 d1]" {
			t.Fatalf("group other leased %v, want its own first deliveries [d0 d1] and no requeued copy", timerIDs(other))
		}
		back := lease(t, q, "g", "c", o)
		if len(back) != 1 || back[0].Event.ID != "d0" || back[0].Event.Attempt != 1 {
			t.Fatalf("after Requeue leased %+v, want d0 as attempt 1", back)
		}
	})
}

// TestLeaseBlockSkipsRequeuesForOtherGroups: a blocking Lease woken by a
// dead letter requeued for another group acknowledges it and hands it
// not out, and goes on waiting for its own events.
func TestLeaseBlockSkipsRequeuesForOtherGroups(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		q := newQueue(t, b, queue.Options{})
		fireN(t, q, "r", 1)
		o := queue.LeaseOptions{Lease: time.Minute}
		ds := lease(t, q, "g", "c", o)
		if len(ds) != 1 {
			t.Fatalf("leased %d, want 1", len(ds))
		}
		r, err := q.Release(ctx, "g", ds[0].DeliveryID, queue.ReleaseOptions{DeadLetter: true, Error: "bad"}, o)
		if err != nil {
			t.Fatal(err)
		}
		if own := lease(t, q, "other", "x", o); len(own) != 1 { // its own first delivery of r0
			t.Fatalf("group other leased %d, want 1", len(own))
		} else if _, err := q.Ack(ctx, "other", own[0].DeliveryID); err != nil {
			t.Fatal(err)
		}
		trips := &tripCounter{}
		qc := hookedQueue(t, b.Client.(*redis.Client).Options().Addr, q.Namespace(), trips.hook())
		got := make(chan []queue.Delivery, 1)
		go func() {
			o := o
			o.Block = 20 * time.Second
			ds, err := qc.Lease(ctx, "other", "x", o)
			if err != nil {
				t.Error(err)
			}
			got <- ds
		}()
		redistest.Eventually(t, 10*time.Second, "the Lease waits", func() bool { return trips.n.Load() >= 3 }) // layout, lease.lua, the wait
		if _, err := q.Deliveries().Requeue(ctx, 0, r.DeadLetterID); err != nil {
			t.Fatal(err)
		}
		fireN(t, q, "s", 1)
		if ds := <-got; fmt.Sprint(timerIDs(ds)) != "[s0]" {
			t.Fatalf("blocking Lease of group other = %v, want [s0] and not g's requeued r0", timerIDs(ds))
		}
		if n := pendingIn(t, b, q, "other"); n != 1 {
			t.Errorf("group other has %d pending, want only s0 (g's requeued copy acknowledged)", n)
		}
		if back := lease(t, q, "g", "c", o); fmt.Sprint(timerIDs(back)) != "[r0 s0]" {
			t.Errorf("group g leased %v, want its requeued r0 and s0", timerIDs(back))
		}
	})
}

// TestLeaseAcrossReplicas: two Queue values, as two stateless API replicas,
// serve one consumer's calls in turn; every event is handed out once.
func TestLeaseAcrossReplicas(t *testing.T) {
	redistest.ForEachAll(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		q1 := newQueue(t, b, queue.Options{})
		q2, err := queue.New(b.Client, queue.Options{Namespace: q1.Namespace()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { q2.Close() })
		fireN(t, q1, "m", 7)
		o := queue.LeaseOptions{Count: 2}
		seen := map[string]int{}
		var held []queue.Delivery
		for i := 0; i < 20; i++ {
			q := []*queue.Queue{q1, q2}[i%2]
			ds := lease(t, q, "g", "c", o)
			if len(ds) > o.Count {
				t.Fatalf("call %d handed out %d, above Count %d", i, len(ds), o.Count)
			}
			for _, d := range ds {
				seen[d.Event.ID]++
			}
			held = append(held, ds...)
		}
		if len(seen) != 7 {
			t.Fatalf("saw %d events, want 7: %v", len(seen), seen)
		}
		for id, n := range seen {
			if n != 1 {
				t.Errorf("%s handed out %d times", id, n)
			}
		}
		// Either replica acknowledges what the other handed out.
		for i, d := range held {
			q := []*queue.Queue{q2, q1}[i%2]
			if acked, err := q.Ack(ctx, "g", d.DeliveryID); err != nil || !acked[0] {
				t.Fatalf("Ack(%s) = %v, %v", d.DeliveryID, acked, err)
			}
		}
		if n := pendingIn(t, b, q1, "g"); n != 0 {
			t.Fatalf("%d pending, want 0", n)
		}
	})
}

func TestLeaseBlockWakesOnFire(t *testing.T) {
	t.Parallel() // its own namespace on each backend; see docs/development.md, "Loops"
	redistest.ForEachAll(t, func(t *testing.T, b *redistest.Backend) {
		q := newQueue(t, b, queue.Options{})
		// The group exists and is drained before the wait starts.
		if ds := lease(t, q, "g", "c", queue.LeaseOptions{}); len(ds) != 0 {
			t.Fatalf("leased %v from an empty namespace", ds)
		}
		// With nothing to hand out, it waits Block out, then returns none.
		start := time.Now()
		if ds := lease(t, q, "g", "c", queue.LeaseOptions{Block: 300 * time.Millisecond}); len(ds) != 0 {
			t.Fatalf("blocking Lease on nothing = %v", ds)
		}
		if d := time.Since(start); d < 300*time.Millisecond {
			t.Fatalf("blocking Lease on nothing returned after %v, before its Block of 300ms", d)
		}
		type result struct {
			ds  []queue.Delivery
			err error
		}
		done := make(chan result, 1)
		go func() {
			ds, err := q.Lease(context.Background(), "g", "c", queue.LeaseOptions{Block: 20 * time.Second})
			done <- result{ds, err}
		}()
		fireN(t, q, "w", 1)
		select {
		case r := <-done:
			if r.err != nil || len(r.ds) != 1 || r.ds[0].Event.ID != "w0" {
				t.Fatalf("blocking Lease = %+v, %v; want w0", r.ds, r.err)
			}
		case <-time.After(15 * time.Second):
			t.Fatal("a blocking Lease did not return the event fired while it waited")
		}
	})
}

func TestAckRefusesBadDeliveryIDs(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		q := newQueue(t, b, queue.Options{})
		fireN(t, q, "u", 1)
		ds := lease(t, q, "g", "c", queue.LeaseOptions{})
		if len(ds) != 1 {
			t.Fatalf("leased %d", len(ds))
		}
		// Well formed, but not pending: false, no error.
		unknown := queue.DeliveryRef{Shard: 0, StreamID: "1-0", Attempt: 1}.String()
		acked, err := q.Ack(ctx, "g", unknown)
		if err != nil || fmt.Sprint(acked) != "[false]" {
			t.Fatalf("Ack(unknown) = %v, %v", acked, err)
		}
		acked, err = q.Ack(ctx, "nogroup", unknown)
		if err != nil || fmt.Sprint(acked) != "[false]" {
			t.Fatalf("Ack in a group that does not exist = %v, %v", acked, err)
		}
		// One bad ID fails the call before anything is acknowledged.
		for _, bad := range []string{"garbage", "1-" + ds[0].Event.StreamID + "-1", ds[0].DeliveryID + "x"} {
			_, err := q.Ack(ctx, "g", ds[0].DeliveryID, bad)
			if !errors.Is(err, queue.ErrInvalidDeliveryID) || !errors.Is(err, queue.ErrInvalidOptions) {
				t.Errorf("Ack(%q) = %v, want ErrInvalidDeliveryID", bad, err)
			}
		}
		if n := pendingIn(t, b, q, "g"); n != 1 {
			t.Fatalf("%d pending after refused Acks, want 1", n)
		}
		if _, err := q.Release(ctx, "g", unknown, queue.ReleaseOptions{}, queue.LeaseOptions{}); !errors.Is(err, queue.ErrDeliveryNotFound) {
			t.Errorf("Release(unknown) = %v, want ErrDeliveryNotFound", err)
		}
	})
}

func TestParseDeliveryID(t *testing.T) {
	ref := queue.DeliveryRef{Shard: 12, StreamID: "1700000000000-3", Attempt: 4}
	if ref.String() != "12-1700000000000-3-4" {
		t.Fatalf("String = %q", ref.String())
	}
	if got, err := queue.ParseDeliveryID(ref.String()); err != nil || got != ref {
		t.Fatalf("round trip = %+v, %v", got, err)
	}
	// A fire's deadline rides along, before the flow.
	dl := queue.DeliveryRef{Shard: 1, StreamID: "1700000000000-0", Attempt: 2, Flow: ":k", Deadline: time.UnixMilli(1700000005000)}
	if want := "1-1700000000000-0-2_1700000005000.Oms"; dl.String() != want {
		t.Fatalf("String = %q, want %q", dl.String(), want)
	}
	if got, err := queue.ParseDeliveryID(dl.String()); err != nil || !got.Deadline.Equal(dl.Deadline) || got.Flow != dl.Flow ||
		got.StreamID != dl.StreamID || got.Attempt != 2 || got.Shard != 1 {
		t.Fatalf("round trip = %+v, %v; want %+v", got, err, dl)
	}
	for _, bad := range []string{"", "0-1-2", "0-1-0-0", "00-1-0-1", "0-01-0-1", "+0-1-0-1", "a-b-c-d", "0-1-0-1-1",
		"0-1--0-1", "999999-1-0-1", "0-1-0-99999999999", "0 -1-0-1", "0-1-0-1\n", strings.Repeat("9", 200),
		"0-1-0-1_", "0-1-0-1_0", "0-1-0-1_01", "0-1-0-1_-5", "0-1-0-1_1_2", "0-1-0-1_99999999999999999", "0-1-0_5-1"} {
		if _, err := queue.ParseDeliveryID(bad); !errors.Is(err, queue.ErrInvalidDeliveryID) {
			t.Errorf("ParseDeliveryID(%q) = %v, want ErrInvalidDeliveryID", bad, err)
		}
	}
}

func TestLeaseValidatesArguments(t *testing.T) {
	m, c := redistest.Mini(t)
	_ = m
	q, err := queue.New(c, queue.Options{Namespace: "v"})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	ctx := context.Background()
	for name, call := range map[string]func() error{
		"bad group":    func() error { _, err := q.Lease(ctx, "a b", "c", queue.LeaseOptions{}); return err },
		"bad consumer": func() error { _, err := q.Lease(ctx, "g", "", queue.LeaseOptions{}); return err },
		"negative":     func() error { _, err := q.Lease(ctx, "g", "c", queue.LeaseOptions{Block: -1}); return err },
		"short lease": func() error {
			_, err := q.Lease(ctx, "g", "c", queue.LeaseOptions{Lease: time.Millisecond})
			return err
		},
		"long lease": func() error { _, err := q.Lease(ctx, "g", "c", queue.LeaseOptions{Lease: 25 * time.Hour}); return err },
		"count": func() error {
			_, err := q.Lease(ctx, "g", "c", queue.LeaseOptions{Count: queue.MaxBatch + 1})
			return err
		},
		"ack group": func() error { _, err := q.Ack(ctx, "", "0-1-0-1"); return err },
		"release delay": func() error {
			_, err := q.Release(ctx, "g", "0-1-0-1", queue.ReleaseOptions{Delay: -1}, queue.LeaseOptions{})
			return err
		},
		"extend": func() error {
			_, err := q.ExtendLease(ctx, "g", "0-1-0-1", time.Hour, queue.LeaseOptions{})
			return err
		},
	} {
		if err := call(); !errors.Is(err, queue.ErrInvalidOptions) {
			t.Errorf("%s: %v, want ErrInvalidOptions", name, err)
		}
	}
	if keys := m.Keys(); len(keys) != 0 {
		t.Errorf("refused calls wrote %v", keys)
	}
}

// TestLeaseUnderApplicationACL: pull consumption needs no right beyond the
// application line of docs/security.md.
func TestLeaseUnderApplicationACL(t *testing.T) {
	srv, admin, app, ns := appUser(t)
	ctx := context.Background()
	fireN(t, newQueue(t, &redistest.Backend{Name: "real", Client: admin, Real: srv}, queue.Options{Namespace: ns}), "acl", 3)
	q, err := queue.New(app, queue.Options{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	o := queue.LeaseOptions{Lease: time.Second, MaxAttempts: 1}
	ds, err := q.Lease(ctx, "g", "c", o)
	if err != nil || len(ds) != 3 {
		t.Fatalf("Lease = %v, %v", ds, err)
	}
	if _, err := q.ExtendLease(ctx, "g", ds[0].DeliveryID, 0, o); err != nil {
		t.Errorf("ExtendLease: %v", err)
	}
	if _, err := q.Release(ctx, "g", ds[1].DeliveryID, queue.ReleaseOptions{Error: "x"}, o); err != nil {
		t.Errorf("Release to a dead letter: %v", err)
	}
	if _, err := q.Ack(ctx, "g", ds[0].DeliveryID, ds[2].DeliveryID); err != nil {
		t.Errorf("Ack: %v", err)
	}
	if ds, err := q.Lease(ctx, "g", "c", queue.LeaseOptions{Block: 50 * time.Millisecond}); err != nil || len(ds) != 0 {
		t.Errorf("blocking Lease on nothing = %v, %v", ds, err)
	}
}

// TestLeaseAppliesOverlapSkip: as in Consume, an occurrence of a schedule
// under OverlapSkip is not handed out while the group has another of its
// occurrences pending.
func TestLeaseAppliesOverlapSkip(t *testing.T) {
	redistest.ForEachAll(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		q := newQueue(t, b, queue.Options{})
		if _, _, err := q.Recurring().Put(ctx, queue.Recurring{ID: "s", Every: time.Hour, Overlap: queue.OverlapSkip}); err != nil {
			t.Fatal(err)
		}
		fireOcc(t, q, "s", 1, 2, 3)
		fireN(t, q, "plain", 1)
		ds := lease(t, q, "g", "c", queue.LeaseOptions{})
		if got := fmt.Sprint(timerIDs(ds)); got != "[plain0 s@1]" {
			t.Fatalf("leased %s, want [plain0 s@1]: s@2 and s@3 overlap s@1", got)
		}
		if c, err := q.Inspect().Counters(ctx); err != nil || c.OverlapSkipped != 2 {
			t.Fatalf("Counters.OverlapSkipped = %d, %v; want 2", c.OverlapSkipped, err)
		}
		if n := pendingIn(t, b, q, "g"); n != 2 {
			t.Fatalf("%d pending, want 2: the skipped ones are acknowledged", n)
		}
		if _, err := q.Ack(ctx, "g", deliveryIDs(ds)...); err != nil {
			t.Fatal(err)
		}
		fireOcc(t, q, "s", 4)
		if ds := lease(t, q, "g", "c", queue.LeaseOptions{}); fmt.Sprint(timerIDs(ds)) != "[s@4]" {
			t.Fatalf("after s@1 was acknowledged leased %v, want [s@4]", timerIDs(ds))
		}
	})
}

// hookedQueue is a Queue of namespace ns on its own client of the server
// at addr, which hook watches; both close with the test.
func hookedQueue(t *testing.T, addr, ns string, hook redis.Hook) *queue.Queue {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 8})
	t.Cleanup(func() { c.Close() })
	c.AddHook(hook)
	q, err := queue.New(c, queue.Options{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Close() })
	return q
}

// cmdHook is a redis.Hook that shows a command sent alone, or a
// pipeline's commands together, to the function before they run.
type cmdHook func(cmds ...redis.Cmder)

func (h cmdHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h cmdHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { h(cmd); return next(ctx, cmd) }
}
func (h cmdHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { h(cmds...); return next(ctx, cmds) }
}

// tripCounter counts round trips (its hook): each command sent alone, and
// each pipeline.
type tripCounter struct{ n atomic.Int64 }

func (c *tripCounter) hook() redis.Hook { return cmdHook(func(...redis.Cmder) { c.n.Add(1) }) }

// TestLeaseRoundTrips: Lease, Ack and Release cost one round trip each,
// however many shards and events: no per-event round trip.
func TestLeaseRoundTrips(t *testing.T) {
	redistest.Require(t)
	srv := redistest.Start(t, redistest.Config{})
	for _, shards := range []int{1, 16} {
		t.Run(fmt.Sprint(shards), func(t *testing.T) {
			ctx := context.Background()
			b := &redistest.Backend{Name: "real", Client: srv.Client(t), Real: srv, Shards: shards}
			q := newQueue(t, b, queue.Options{})
			trips := &tripCounter{}
			qc := hookedQueue(t, srv.Addr(), q.Namespace(), trips.hook())
			o := queue.LeaseOptions{Count: 100}
			// Warm up: read the layout, load the scripts, open the pipeline
			// connection (whose handshake the hook sees).
			lease(t, qc, "g", "c", o)
			unknown := queue.DeliveryRef{StreamID: "1-0", Attempt: 1}.String()
			if _, err := qc.Release(ctx, "g", unknown, queue.ReleaseOptions{}, o); !errors.Is(err, queue.ErrDeliveryNotFound) {
				t.Fatal(err)
			}
			if _, err := qc.Ack(ctx, "g", unknown, unknown); err != nil {
				t.Fatal(err)
			}
			fireN(t, q, "rt", 40)
			measure := func(what string, max int64, f func()) {
				t.Helper()
				before := trips.n.Load()
				f()
				if n := trips.n.Load() - before; n > max {
					t.Errorf("%s: %d round trips, want at most %d", what, n, max)
				} else {
					t.Logf("%s over %d shards: %d round trips", what, shards, n)
				}
			}
			var ds []queue.Delivery
			// 40 events over 16 shards: a shard holding more than its
			// share of 100 is asked again, once.
			measure("Lease of 40", 2, func() { ds = lease(t, qc, "g", "c", o) })
			if len(ds) != 40 {
				t.Fatalf("leased %d, want 40", len(ds))
			}
			measure("Release", 1, func() {
				if _, err := qc.Release(ctx, "g", ds[0].DeliveryID, queue.ReleaseOptions{}, o); err != nil {
					t.Fatal(err)
				}
			})
			measure("Ack of 39", 1, func() {
				if _, err := qc.Ack(ctx, "g", deliveryIDs(ds[1:])...); err != nil {
					t.Fatal(err)
				}
			})
			measure("empty Lease", 1, func() { lease(t, qc, "g", "other", queue.LeaseOptions{Lease: time.Minute, Count: 100}) })
		})
	}
}

// TestLeaseGroupStart: a new group starts at the oldest fire kept, or with
// StartNow after the newest of every shard, even when a call's Count is
// below the shard count; Start does nothing for a group that exists.
func TestLeaseGroupStart(t *testing.T) {
	forEachLayout(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		q := newQueue(t, b, queue.Options{})
		fireN(t, q, "old", 6)
		now := queue.LeaseOptions{Count: 1, Start: queue.StartNow}
		if ds := lease(t, q, "new", "c", now); len(ds) != 0 {
			t.Fatalf("a group started now got the old fires %v", timerIDs(ds))
		}
		fireN(t, q, "fresh", 6)
		var got []string
		for range 20 {
			ds := lease(t, q, "new", "c", now)
			if len(ds) == 0 {
				break
			}
			got = append(got, timerIDs(ds)...)
		}
		slices.Sort(got)
		if fmt.Sprint(got) != "[fresh0 fresh1 fresh2 fresh3 fresh4 fresh5]" {
			t.Fatalf("a group started now got %v, want the six fresh fires", got)
		}
		for _, o := range []queue.LeaseOptions{{Count: 100}, {Count: 100, Start: queue.StartOldest}} {
			group := "all-" + string(o.Start)
			if ds := lease(t, q, group, "c", o); len(ds) != 12 {
				t.Fatalf("a group started with %q got %v, want all 12 fires", o.Start, timerIDs(ds))
			}
		}
		shards, err := q.Inspect().Shards(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for k := range shards {
			if err := b.Client.XGroupCreate(ctx, q.Keys().Stream(k), "exists", "0").Err(); err != nil {
				t.Fatal(err)
			}
		}
		if ds := lease(t, q, "exists", "c", queue.LeaseOptions{Count: 100, Start: queue.StartNow}); len(ds) != 12 {
			t.Fatalf("StartNow for a group that exists handed out %v, want all 12 fires", timerIDs(ds))
		}
		if _, err := q.Lease(ctx, "g", "c", queue.LeaseOptions{Start: "latest"}); !errors.Is(err, queue.ErrInvalidOptions) || !strings.Contains(err.Error(), `"now"`) {
			t.Fatalf("Lease with start latest = %v, want ErrInvalidOptions naming now", err)
		}
	})
}

// wakeCounter counts the blocking reads for new fires that returned
// entries: the waiters a new fire woke.
type wakeCounter struct{ n atomic.Int64 }

func (c *wakeCounter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c *wakeCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if name := cmd.Name(); (name == "xread" || name == "xreadgroup") && err == nil {
			c.n.Add(1)
		}
		return err
	}
}
func (c *wakeCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestOneFireWakesOneBlockedLease: of four Lease calls blocked on a group,
// one new fire wakes one, which gets it; the others wait on, never having
// run a lease round for it. (A plain XREAD woke all four, and three ran an
// empty round: BENCHMARKS.md, "Delivery at a fire's cost".) A second fire
// then wakes one of the three.
func TestOneFireWakesOneBlockedLease(t *testing.T) {
	redistest.Require(t)
	srv := redistest.Start(t, redistest.Config{})
	admin := srv.Client(t)
	blocked := func() int {
		info, err := admin.Info(context.Background(), "clients").Result()
		if err != nil {
			t.Fatal(err)
		}
		_, rest, _ := strings.Cut(info, "blocked_clients:")
		n, _ := strconv.Atoi(strings.TrimSpace(strings.SplitN(rest, "\r\n", 2)[0]))
		return n
	}
	for _, shards := range []int{1, 16} {
		t.Run(fmt.Sprint(shards), func(t *testing.T) {
			b := &redistest.Backend{Name: "real", Client: srv.Client(t), Real: srv, Shards: shards}
			q := newQueue(t, b, queue.Options{})
			wakes := &wakeCounter{}
			qc := hookedQueue(t, srv.Addr(), q.Namespace(), wakes)
			ctx, cancel := context.WithCancel(context.Background())
			got := make(chan []queue.Delivery, 4)
			var wg sync.WaitGroup
			for i := range 4 {
				wg.Go(func() {
					ds, err := qc.Lease(ctx, "herd", fmt.Sprint("c", i), queue.LeaseOptions{Count: 1, Block: time.Minute})
					if err != nil && ctx.Err() == nil {
						t.Error(err)
					}
					got <- ds
				})
			}
			defer func() { cancel(); wg.Wait() }()
			waitUntil(t, 10*time.Second, "four blocked Lease calls", func() bool { return blocked() == 4 })
			for round, want := range []int{3, 2} {
				before := wakes.n.Load()
				fireN(t, q, fmt.Sprint("h", round, "-"), 1)
				select {
				case ds := <-got:
					if len(ds) != 1 {
						t.Fatalf("a woken Lease returned %d deliveries, want 1", len(ds))
					}
				case <-time.After(10 * time.Second):
					t.Fatal("no blocked Lease returned the new fire")
				}
				waitUntil(t, 10*time.Second, "the others blocked again", func() bool { return blocked() == want })
				if n := wakes.n.Load() - before; n != 1 {
					t.Errorf("one new fire woke %d of %d blocked Lease calls, want 1", n, want+1)
				}
			}
		})
	}
}

// roundCounter counts lease rounds: pipelines (or commands) that run
// lease.lua, as a Redis function or by its SHA.
type roundCounter struct {
	n  atomic.Int64
	mu sync.Mutex
	at []time.Time // when each round was sent
}

func (c *roundCounter) count(cmds ...redis.Cmder) {
	sha := fmt.Sprintf("%x", sha1.Sum([]byte(lua.Lease.Source)))
	for _, cmd := range cmds {
		if args := cmd.Args(); len(args) > 1 {
			if s := fmt.Sprint(args[1]); s == lua.Lease.Function || s == sha {
				c.n.Add(1)
				c.mu.Lock()
				c.at = append(c.at, time.Now())
				c.mu.Unlock()
				return
			}
		}
	}
}

// TestLeaseWaitReadsPastStaleWakes: fires handed out while no Lease waited
// leave the wake group behind; a Lease that then blocks reads past those
// entries, which its round already saw, instead of running a lease round
// for each, and still wakes for the next new fire.
func TestLeaseWaitReadsPastStaleWakes(t *testing.T) {
	redistest.Require(t)
	srv := redistest.Start(t, redistest.Config{})
	ctx := context.Background()
	b := &redistest.Backend{Name: "real", Client: srv.Client(t), Real: srv}
	q := newQueue(t, b, queue.Options{})
	// The first blocking Lease creates the wake group.
	if ds, err := q.Lease(ctx, "stale", "c", queue.LeaseOptions{Count: 1, Block: 50 * time.Millisecond}); err != nil || len(ds) != 0 {
		t.Fatalf("first Lease: %v, %v", ds, err)
	}
	fireN(t, q, "s", 40)
	if ds := lease(t, q, "stale", "c", queue.LeaseOptions{Count: 100}); len(ds) != 40 {
		t.Fatalf("leased %d, want 40", len(ds))
	}
	rounds := &roundCounter{}
	qc := hookedQueue(t, srv.Addr(), q.Namespace(), cmdHook(rounds.count))
	got := make(chan []queue.Delivery, 1)
	go func() {
		ds, err := qc.Lease(ctx, "stale", "c", queue.LeaseOptions{Count: 1, Block: 10 * time.Second})
		if err != nil {
			t.Error(err)
		}
		got <- ds
	}()
	// The waiting Lease's first round (a loaded machine can take longer
	// than the sleep below to start it: a helper's run at load 20 once
	// saw none in 300 ms), then 300 ms more, under the one-second poll.
	redistest.Eventually(t, 10*time.Second, "the waiting Lease's first lease round", func() bool {
		rounds.mu.Lock()
		defer rounds.mu.Unlock()
		return len(rounds.at) > 0
	})
	time.Sleep(300 * time.Millisecond)
	// A round for a stale wake follows the first within milliseconds;
	// the one-second poll's round (which a loaded machine can reach
	// before this goroutine wakes from its sleep) is no stale wake.
	rounds.mu.Lock()
	at := slices.Clone(rounds.at)
	rounds.mu.Unlock()
	for i := 1; i < len(at); i++ {
		if gap := at[i].Sub(at[i-1]); gap < queue.LeasePoll/2 {
			t.Errorf("a Lease waiting behind 40 stale wakes ran %d lease rounds, round %d %v after the one before, want 1 per poll (%v)", len(at), i+1, gap, queue.LeasePoll)
			break
		}
	}
	fireN(t, q, "new", 1)
	select {
	case ds := <-got:
		if len(ds) != 1 || ds[0].Event.ID != "new0" {
			t.Fatalf("the waiting Lease got %v, want new0", timerIDs(ds))
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the waiting Lease did not wake for a new fire")
	}
}

// appUser starts a redis-server of its own with a user made from
// docs/security.md's application line, verbatim but for NS, the password
// and the rights in drop, and returns the server's admin client, the
// namespace and a client logged in as that user.
func appUser(t *testing.T, drop ...string) (srv *redistest.Server, admin, app *redis.Client, ns string) {
	t.Helper()
	redistest.Require(t)
	doc, err := os.ReadFile("../docs/security.md")
	if err != nil {
		t.Fatal(err)
	}
	var line []string
	for _, l := range strings.Split(string(doc), "\n") {
		if strings.HasPrefix(l, "ACL SETUSER timerq-app-NS ") {
			line = strings.Fields(l)
		}
	}
	if line == nil {
		t.Fatal("docs/security.md has no timerq-app-NS line")
	}
	srv = redistest.Start(t, redistest.Config{})
	admin = srv.Client(t)
	ns = redistest.Namespace(t)
	var args []any
	for _, w := range line {
		if strings.HasPrefix(w, ">") {
			w = ">pw"
		}
		if !slices.Contains(drop, w) {
			args = append(args, strings.ReplaceAll(w, "NS", ns))
		}
	}
	if err := admin.Do(context.Background(), args...).Err(); err != nil {
		t.Fatalf("ACL SETUSER: %v", err)
	}
	app = redis.NewClient(&redis.Options{Addr: srv.Addr(), Username: "timerq-app-" + ns, Password: "pw"})
	t.Cleanup(func() { app.Close() })
	return srv, admin, app, ns
}
