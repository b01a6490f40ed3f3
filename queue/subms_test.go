package queue_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/queue"
)

// claimUntil claims until every timer of want fired, and fails if one fired
// before its due time by the claim's clock (TIME to the microsecond).
func claimUntil(t *testing.T, q *queue.Queue, want map[string]time.Time) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for len(want) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d timers never fired: %v", len(want), want)
		}
		res, err := q.Engine().Claim(context.Background(), queue.MaxBatch)
		if err != nil {
			t.Fatalf("Claim: %v", err)
		}
		for _, f := range res.Fired {
			due, ok := want[f.ID]
			if !ok {
				t.Fatalf("fired %q, which was not scheduled here", f.ID)
			}
			if res.Clock.Before(due) {
				t.Fatalf("%q fired at %v by the server clock, before its due time %v", f.ID, res.Clock, due)
			}
			delete(want, f.ID)
		}
	}
}

// Due times below the millisecond never fire early by the server's clock,
// on real Redis too, where TIME runs on its own.
func TestNeverEarlyBelowAMillisecond(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		q := newQueue(t, b, queue.Options{})
		now := serverNow(t, b)
		want := map[string]time.Time{}
		var batch []queue.NewTimer
		for i := range 40 {
			id := fmt.Sprintf("t%d", i)
			due := now.Add(2*time.Millisecond + time.Duration(i)*137*time.Microsecond)
			want[id] = due
			batch = append(batch, queue.NewTimer{ID: id, Due: due})
		}
		if _, err := q.ScheduleBatch(ctx, batch); err != nil {
			t.Fatal(err)
		}
		claimUntil(t, q, want)
	})
}

// A timer an older timerq wrote, with a whole-millisecond score, is a
// valid timer: it fires, at its millisecond and not before.
func TestWholeMillisecondScoreOfOlderVersionFires(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		q := newQueue(t, b, queue.Options{})
		keys := q.Keys().Shard(0)
		now := serverNow(t, b)
		due := now.Truncate(time.Millisecond).Add(5 * time.Millisecond)
		if b.Mini != nil {
			due = time.Date(2031, 5, 6, 7, 8, 9, 0, time.UTC)
		}
		// What the old schedule.lua wrote: the record without a due time,
		// the due time as a whole-millisecond score.
		ms := strconv.FormatInt(due.UnixMilli(), 10)
		if err := b.Client.HSet(ctx, keys[1], "old", "s::"+strconv.FormatInt(now.UnixMilli(), 10)+"::p").Err(); err != nil {
			t.Fatal(err)
		}
		if err := b.Client.ZAdd(ctx, keys[0], redis.Z{Score: float64(due.UnixMilli()), Member: "old"}).Err(); err != nil {
			t.Fatal(err)
		}
		got, err := q.Get(ctx, "old")
		if err != nil || !got.Due.Equal(due) || got.State != queue.StateScheduled {
			t.Fatalf("Get of the old record (score %s) = %+v, %v", ms, got, err)
		}
		if b.Mini != nil {
			b.Mini.SetTime(due.Add(-time.Microsecond))
			if f := claimAll(t, q); len(f) != 0 {
				t.Fatalf("fired %+v 1 µs before its due time", f)
			}
			b.Mini.SetTime(due)
			if f := claimAll(t, q); len(f) != 1 || !f[0].Due.Equal(due) || string(f[0].Payload) != "p" {
				t.Fatalf("fired %+v at its due time, want the old timer", f)
			}
			return
		}
		claimUntil(t, q, map[string]time.Time{"old": due})
	})
}
