package queue_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/queue"
)

// TestRecentAndReadFires: RecentFires gives the newest events first and
// ReadFires follows the stream from a given entry, each event once.
func TestRecentAndReadFires(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		q := newQueue(t, b, queue.Options{})
		if evs, err := q.RecentFires(ctx, 5); err != nil || len(evs) != 0 {
			t.Fatalf("RecentFires on an empty namespace = %v, %v; want none", evs, err)
		}
		fireN(t, q, "r", 3)
		evs, err := q.RecentFires(ctx, 2)
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) != 2 || evs[0].ID != "r2" || evs[1].ID != "r1" || string(evs[0].Payload) != "p-2" || evs[0].FiredAt.IsZero() {
			t.Fatalf("RecentFires(2) = %+v, want r2 then r1 with payload and times", evs)
		}
		all, err := q.ReadFires(ctx, "0", 10, 0)
		if err != nil || len(all) != 3 || all[0].ID != "r0" || all[2].ID != "r2" {
			t.Fatalf("ReadFires(0) = %+v, %v; want r0 r1 r2", all, err)
		}
		none, err := q.ReadFires(ctx, evs[0].StreamID, 10, 10*time.Millisecond)
		if err != nil || len(none) != 0 {
			t.Fatalf("ReadFires after the newest = %+v, %v; want nothing", none, err)
		}
		fireN(t, q, "s", 1)
		next, err := q.ReadFires(ctx, evs[0].StreamID, 10, 0)
		if err != nil || len(next) != 1 || next[0].ID != "s0" {
			t.Fatalf("ReadFires after r2 = %+v, %v; want s0", next, err)
		}
		if _, err := q.ReadFires(ctx, "$", 10, 0); !errors.Is(err, queue.ErrInvalidOptions) {
			t.Errorf("ReadFires($) = %v, want ErrInvalidOptions", err)
		}
	})
}

// TestRequeue: a dead letter goes back to the group that gave up on it, as
// a fresh delivery; the other group does not see it again, the dead-letter
// stream loses it, and a second requeue reports it gone.
func TestRequeue(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		q := newQueue(t, b, queue.Options{})
		if gs, err := q.Groups(ctx); err != nil || len(gs) != 0 {
			t.Fatalf("Groups without a stream = %v, %v; want none", gs, err)
		}
		var healed atomic.Bool
		var mu sync.Mutex
		seen := map[string][]string{} // group -> "id/attempt"
		handler := func(group string) func(context.Context, queue.Event) error {
			return func(_ context.Context, ev queue.Event) error {
				mu.Lock()
				seen[group] = append(seen[group], fmt.Sprintf("%s/%d", ev.ID, ev.Attempt))
				mu.Unlock()
				if group == "bad" && ev.ID == "d1" && !healed.Load() {
					return errors.New("poison")
				}
				return nil
			}
		}
		o := queue.ConsumeOptions{MaxAttempts: 2, RetryDelay: 10 * time.Millisecond, ClaimIdle: 5 * time.Second, Block: 20 * time.Millisecond}
		consumeAsync(t, q, "bad", "c1", handler("bad"), o)
		consumeAsync(t, q, "good", "c2", handler("good"), o)
		fireN(t, q, "d", 2)

		var dls []queue.DeadLetter
		waitUntil(t, 5*time.Second, "a dead letter", func() bool {
			var err error
			dls, _, err = q.DeadLetters(ctx, "", 10)
			if err != nil {
				t.Fatal(err)
			}
			return len(dls) == 1
		})
		dl := dls[0]
		if dl.Event.ID != "d1" || dl.Group != "bad" || dl.Consumer != "c1" || dl.Attempts != 2 || dl.Error != "poison" || dl.FireStreamID == "" || string(dl.Event.Payload) != "p-1" {
			t.Fatalf("dead letter = %+v", dl)
		}
		if n, err := q.DeadLetterCount(ctx); err != nil || n != 1 {
			t.Fatalf("DeadLetterCount = %d, %v; want 1", n, err)
		}
		waitUntil(t, 5*time.Second, "both groups done", func() bool {
			gs, err := q.Groups(ctx)
			if err != nil {
				t.Fatal(err)
			}
			return len(gs) == 2 && gs[0].Pending == 0 && gs[1].Pending == 0
		})
		gs, _ := q.Groups(ctx)
		if gs[0].Name != "bad" || gs[1].Name != "good" || gs[0].Consumers != 1 || gs[0].LastDeliveredID == "" {
			t.Fatalf("Groups = %+v", gs)
		}

		healed.Store(true)
		id, err := q.Requeue(ctx, dl.Event.StreamID)
		if err != nil || id == "" {
			t.Fatalf("Requeue = %q, %v", id, err)
		}
		waitUntil(t, 5*time.Second, "the requeued delivery", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(seen["bad"]) == 4
		})
		// Group good has read past the requeued entry (and skipped it):
		// had it been delivered there, its handler would have seen it.
		waitUntil(t, 5*time.Second, "group good to pass the requeued entry", func() bool {
			gs, err := q.Groups(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, g := range gs {
				if g.Name == "good" {
					return g.LastDeliveredID == id && g.Pending == 0
				}
			}
			return false
		})
		mu.Lock()
		bad, good := fmt.Sprint(seen["bad"]), fmt.Sprint(seen["good"])
		mu.Unlock()
		if bad != "[d0/1 d1/1 d1/2 d1/1]" {
			t.Errorf("group bad saw %s; want d1 again as a first attempt", bad)
		}
		if good != "[d0/1 d1/1]" {
			t.Errorf("group good saw %s; the requeue was not meant for it", good)
		}
		if n, _ := q.DeadLetterCount(ctx); n != 0 {
			t.Errorf("%d dead letters after requeue, want 0", n)
		}
		waitUntil(t, 5*time.Second, "acknowledged", func() bool {
			gs, _ := q.Groups(ctx)
			return gs[0].Pending == 0 && gs[1].Pending == 0
		})
		if _, err := q.Requeue(ctx, dl.Event.StreamID); !errors.Is(err, queue.ErrDeadLetterNotFound) {
			t.Errorf("second Requeue = %v, want ErrDeadLetterNotFound", err)
		}
		if _, err := q.Requeue(ctx, "not-an-id"); !errors.Is(err, queue.ErrInvalidOptions) {
			t.Errorf("Requeue(not-an-id) = %v, want ErrInvalidOptions", err)
		}
	})
}

// TestDeadLettersPaging: the cursor walks the dead-letter stream in pages.
func TestDeadLettersPaging(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		q := newQueue(t, b, queue.Options{})
		for i := range 5 {
			args := &redis.XAddArgs{Stream: q.DeadLetterKey(), Values: []any{"id", fmt.Sprint("t", i), "due", "1", "fired", "2", "payload", "", "group", "g"}}
			if err := b.Client.XAdd(ctx, args).Err(); err != nil {
				t.Fatal(err)
			}
		}
		var ids []string
		cursor := ""
		for pages := 0; ; pages++ {
			if pages > 5 {
				t.Fatal("paging does not end")
			}
			page, next, err := q.DeadLetters(ctx, cursor, 2)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range page {
				ids = append(ids, d.Event.ID)
			}
			if next == "" {
				break
			}
			cursor = next
		}
		if fmt.Sprint(ids) != "[t0 t1 t2 t3 t4]" {
			t.Errorf("paged dead letters = %v", ids)
		}
	})
}
