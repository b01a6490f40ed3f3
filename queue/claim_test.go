package queue_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/queue"
)

// A claim that would fire a timer refuses a foreign type in any key it
// writes, naming the key, before its first write, whether the fire stream
// is trimmed or not (the first XADD, the claim's first write, finds its
// type; a TYPE the counters'): the timer is still scheduled, in either
// layout. A claim that finds nothing due reads only the due set, and
// checks nothing else.
// (In layout 2 the fired and expire sets are the due set, the sched set,
// whose foreign type TestWrongTypeKeyIsReportedAndNothingWritten covers.)
func TestClaimRefusesForeignTypes(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		for _, maxlen := range []int64{0, queue.Unbounded} {
			// The keys claim writes, by their index in Keys: timers,
			// fired, expire, fires, counters.
			for _, k := range []int{1, 2, 4, 5, 6} {
				q := newQueue(t, b, queue.Options{StreamMaxLen: maxlen})
				if _, err := q.Schedule(ctx, "due", time.Now().Add(-time.Second), nil); err != nil {
					t.Fatal(err)
				}
				key := q.Keys().Shard(0)[k]
				if key == q.Keys().Shard(0)[0] {
					continue
				}
				if err := b.Client.Del(ctx, key).Err(); err != nil {
					t.Fatal(err)
				}
				if err := b.Client.Set(ctx, key, "foreign", 0).Err(); err != nil {
					t.Fatal(err)
				}
				_, err := q.Engine().Claim(ctx, 10)
				if !errors.Is(err, queue.ErrWrongType) || !strings.Contains(err.Error(), key) {
					t.Fatalf("StreamMaxLen %d: claim over a foreign %s = %v, want ErrWrongType naming it", maxlen, key, err)
				}
				if n, err := b.Client.ZCard(ctx, q.Keys().Shard(0)[0]).Result(); err != nil || n != 1 {
					t.Fatalf("StreamMaxLen %d: the claim refused over %s left %d due timers (%v), want 1 untouched", maxlen, key, n, err)
				}
				// (its record, read raw: Get checks every key's type)
				if rec, err := b.Client.HGet(ctx, q.Keys().Shard(0)[1], "due").Result(); k != 1 && (err != nil || !strings.HasPrefix(rec, "s:")) {
					t.Fatalf("StreamMaxLen %d: after the claim refused over %s the record is %q (%v), want it scheduled", maxlen, key, rec, err)
				}
			}
		}
		// Every key but the due set: the fired set, and in layout 2,
		// where that is the due set, the fire stream.
		for _, k := range []int{2, 5} {
			q := newQueue(t, b, queue.Options{})
			key := keysAt(t, q, 0)[k]
			if key == q.Keys().Shard(0)[0] {
				continue
			}
			if err := b.Client.Set(ctx, key, "foreign", 0).Err(); err != nil {
				t.Fatal(err)
			}
			if res, err := q.Engine().Claim(ctx, 10); err != nil || len(res.Fired) != 0 {
				t.Fatalf("an empty claim beside a foreign %s = %v, %v; want nothing fired, no error", key, res, err)
			}
		}
	})
}

// A claim reports the server's clock twice: Now to the millisecond (every
// timer it fired has FiredAt = Now) and Clock to the microsecond, which a
// poller sleeps by.
func TestClaimClockHasMicroseconds(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		q := newQueue(t, b, queue.Options{})
		at := time.Date(2030, 1, 2, 3, 4, 5, 678_901_000, time.UTC)
		if b.Mini != nil {
			b.Mini.SetTime(at)
		}
		if _, err := q.Schedule(ctx, "due", time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC), nil); err != nil {
			t.Fatal(err)
		}
		res, err := q.Engine().Claim(ctx, 10)
		if err != nil || len(res.Fired) != 1 {
			t.Fatalf("claim = %+v, %v; want one timer fired", res, err)
		}
		if !res.Clock.Truncate(time.Millisecond).Equal(res.Now) || !res.Fired[0].FiredAt.Equal(res.Now) {
			t.Fatalf("Clock %v, Now %v, FiredAt %v: want Now = FiredAt = Clock to the millisecond", res.Clock, res.Now, res.Fired[0].FiredAt)
		}
		if b.Mini != nil && !res.Clock.Equal(at) {
			t.Fatalf("Clock = %v, want the server's %v to the microsecond", res.Clock, at)
		}
	})
}

// Whatever its limit, a claim fires min(limit, due left) timers, earliest
// first, and reports as NextDue the earliest due time it left: a due one
// while some are left, else the next pending one.
func TestClaimLimitsAndNextDue(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		for _, limit := range []int{1, 8, 9, 10, 30} {
			q := newQueue(t, b, queue.Options{})
			base := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
			var batch []queue.NewTimer
			for i := range 20 {
				batch = append(batch, queue.NewTimer{ID: fmt.Sprintf("t%02d", i), Due: base.Add(time.Duration(i) * time.Second)})
			}
			later := time.Now().Add(time.Hour).Truncate(time.Millisecond)
			batch = append(batch, queue.NewTimer{ID: "later", Due: later})
			if _, err := q.ScheduleBatch(ctx, batch); err != nil {
				t.Fatal(err)
			}
			for fired := 0; fired < 20; {
				res, err := q.Engine().Claim(ctx, limit)
				if err != nil {
					t.Fatal(err)
				}
				want := min(limit, 20-fired)
				if len(res.Fired) != want || res.Fired[0].ID != fmt.Sprintf("t%02d", fired) {
					t.Fatalf("limit %d, %d fired before: claim fired %d starting %v, want %d starting t%02d",
						limit, fired, len(res.Fired), res.Fired, want, fired)
				}
				fired += want
				next := later
				if fired < 20 {
					next = base.Add(time.Duration(fired) * time.Second)
				}
				if !res.NextDue.Equal(next) {
					t.Fatalf("limit %d, %d fired: NextDue %v, want %v", limit, fired, res.NextDue, next)
				}
			}
		}
	})
}

// In layout 2 the fired timers stay in the due set's key, in a band above
// every due time, and the claim finds its next due time by rank: a fired
// timer there is no next due time, whether the claim fired something or
// found nothing due.
func TestClaimNextDueLeavesFiredBand(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		q := newQueue(t, b, queue.Options{})
		upgradeAll(t, q, 100)
		for _, id := range []string{"a", "b"} {
			if _, err := q.Schedule(ctx, id, time.Now().Add(-time.Second), nil); err != nil {
				t.Fatal(err)
			}
			res, err := q.Engine().Claim(ctx, 10)
			if err != nil || len(res.Fired) != 1 || !res.NextDue.IsZero() {
				t.Fatalf("claim of %s beside the fired band = %+v, %v; want it fired and no NextDue", id, res, err)
			}
		}
		res, err := q.Engine().Claim(ctx, 10)
		if err != nil || len(res.Fired) != 0 || !res.NextDue.IsZero() {
			t.Fatalf("empty claim beside the fired band = %+v, %v; want nothing fired and no NextDue", res, err)
		}
		later := time.Now().Add(time.Hour).Truncate(time.Millisecond)
		if _, err := q.Schedule(ctx, "later", later, nil); err != nil {
			t.Fatal(err)
		}
		if res, err := q.Engine().Claim(ctx, 10); err != nil || !res.NextDue.Equal(later) {
			t.Fatalf("empty claim with a pending timer = %+v, %v; want NextDue %v", res, err, later)
		}
	})
}
