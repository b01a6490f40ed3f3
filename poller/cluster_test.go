package poller_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/timerq/timerq/internal/keyspace"
	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/poller"
	"github.com/timerq/timerq/queue"
)

// TestSlotMigrationPausesOnlyItsShard moves shard 0's slot to another
// master, key by key, while two pollers fire a 16-shard namespace. Nothing
// is lost, nothing fires twice or early, the other shards fire during the
// move, and shard 0 resumes on its own.
func TestSlotMigrationPausesOnlyItsShard(t *testing.T) {
	t.Parallel() // servers of its own; see docs/development.md, "Loops"
	c := redistest.StartCluster(t, 3, nil)
	rdb := c.Client(t)
	ctx := context.Background()
	q := newShardedQueue(t, rdb, 16)
	const n = 3000
	base := time.Now().Add(500 * time.Millisecond)
	span := 6 * time.Second
	batch := make([]queue.NewTimer, n)
	for i := range batch {
		batch[i] = queue.NewTimer{ID: fmt.Sprint("m", i), Due: base.Add(time.Duration(i) * span / n)}
	}
	if _, err := q.ScheduleBatch(ctx, batch); err != nil {
		t.Fatal(err)
	}
	var pauses, fired atomic.Int64
	for _, id := range []string{"p1", "p2"} {
		p, err := poller.New(q, poller.Options{
			WorkerID: id, Heartbeat: 200 * time.Millisecond, MemberTTL: time.Second,
			MaxPollInterval: 100 * time.Millisecond, BackoffMax: 300 * time.Millisecond,
			Maintenance: poller.MaintenanceOptions{Disabled: true},
			Hooks: poller.Hooks{
				Paused:  func(int, error) { pauses.Add(1) },
				Claimed: func(r queue.ClaimResult) { fired.Add(int64(len(r.Fired))) },
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		start(t, p)
	}
	slot := keyspace.Slot(q.Keys().Shard(0)[0])
	owner := c.ServerFor(t, q.Keys().Shard(0)[0])
	to := c.Nodes[0]
	if to == owner {
		to = c.Nodes[1]
	}
	// Move the slot while the timers are firing: a quarter of them fired,
	// most still to come on every shard.
	waitFor(t, 10*time.Second, "a quarter of the timers to fire", func() bool { return fired.Load() >= n/4 })
	moveStart := time.Now()
	var wg sync.WaitGroup
	var moveErr error
	moved := make(chan struct{})
	wg.Go(func() { defer close(moved); moveErr = c.MigrateSlot(t, slot, to, 400*time.Millisecond) })
	// Meanwhile, schedule and read timers of the moving shard: the queue
	// retries them through the move, so none fails.
	var during []queue.NewTimer
	var callErrs []error
	var ids []string
	for i := 0; len(ids) < 200; i++ {
		if id := fmt.Sprint("mv", i); keyspace.ShardOf(id, 16) == 0 {
			ids = append(ids, id)
		}
	}
	wg.Go(func() {
		for _, id := range ids {
			select {
			case <-moved:
				return
			case <-time.After(20 * time.Millisecond):
			}
			tm := queue.NewTimer{ID: id, Due: time.Now().Add(500 * time.Millisecond)}
			if _, err := q.Schedule(ctx, tm.ID, tm.Due, nil); err != nil {
				callErrs = append(callErrs, err)
				continue
			}
			if _, err := q.Get(ctx, tm.ID); err != nil {
				callErrs = append(callErrs, err)
			}
			during = append(during, tm)
		}
	})
	wg.Wait()
	moveEnd := time.Now()
	if moveErr != nil {
		t.Fatalf("migrating slot %d: %v", slot, moveErr)
	}
	if len(callErrs) > 0 || len(during) == 0 {
		t.Fatalf("%d calls on the moving shard failed (first: %v); %d scheduled", len(callErrs), callErrs, len(during))
	}
	batch = append(batch, during...)
	waitFor(t, 20*time.Second, "every timer to fire", func() bool {
		st, err := q.Stats(ctx)
		return err == nil && st.Fired == int64(len(batch))
	})
	if got := c.ServerFor(t, q.Keys().Shard(0)[0]); got != to {
		t.Fatalf("slot %d is on %s, not %s", slot, got.Addr(), to.Addr())
	}
	counts := map[string]int{}
	duringMove := 0
	for k := range 16 {
		entries, err := rdb.XRange(ctx, q.Keys().Stream(k), "-", "+").Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			id := e.Values["id"].(string)
			counts[id]++
			due, _ := strconv.ParseInt(e.Values["due"].(string), 10, 64)
			fired, _ := strconv.ParseInt(e.Values["fired"].(string), 10, 64)
			if fired < due {
				t.Errorf("%s fired %d ms early", id, due-fired)
			}
			if k != 0 && fired >= moveStart.UnixMilli() && fired <= moveEnd.UnixMilli() {
				duringMove++
			}
		}
	}
	for _, tm := range batch {
		if counts[tm.ID] != 1 {
			t.Fatalf("%s fired %d times", tm.ID, counts[tm.ID])
		}
	}
	if pauses.Load() == 0 {
		t.Errorf("the move paused shard 0 but no pause was counted")
	}
	if duringMove == 0 {
		t.Fatalf("no other shard fired during the %v move", moveEnd.Sub(moveStart))
	}
	t.Logf("move took %v; %d fires of other shards during it; %d shard pauses counted", moveEnd.Sub(moveStart), duringMove, pauses.Load())
}
