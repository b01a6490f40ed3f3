package queue_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/timerq/timerq/internal/keyspace"
	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/queue"
)

// An application's queue that read the one-shard layout of a namespace not
// yet created follows `timerctl namespace create --shards 16` without a
// restart: a Schedule right after the creation, before the queue's next
// read of the meta key, is refused in the old layout and goes to the new
// one, and a queue that writes nothing reads the new layout within about a
// second.
func TestLayoutFollowsNamespaceCreatedLater(t *testing.T) {
	t.Parallel() // its own namespace on each backend; see docs/development.md, "Loops"
	redistest.ForEachAll(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		ns := redistest.Namespace(t)
		early, err := queue.New(b.Client, queue.Options{Namespace: ns})
		if err != nil {
			t.Fatal(err)
		}
		defer early.Close()
		idle, err := queue.New(b.Client, queue.Options{Namespace: ns})
		if err != nil {
			t.Fatal(err)
		}
		defer idle.Close()
		debouncer, err := queue.New(b.Client, queue.Options{Namespace: ns})
		if err != nil {
			t.Fatal(err)
		}
		defer debouncer.Close()
		pinned, err := queue.New(b.Client, queue.Options{Namespace: ns, Shards: 1})
		if err != nil {
			t.Fatal(err)
		}
		defer pinned.Close()
		for _, q := range []*queue.Queue{early, idle, debouncer, pinned} {
			if n, err := q.Inspect().Shards(ctx); err != nil || n != 1 {
				t.Fatalf("Shards before the creation = %d, %v; want 1", n, err)
			}
		}
		if _, err := queue.CreateNamespace(ctx, b.Client, ns, 16); err != nil {
			t.Fatal(err)
		}
		// At once, well within the queue's trust in what it read.
		var ids []string
		for i := range 8 {
			id := "t-" + string(rune('a'+i))
			ids = append(ids, id)
			if _, err := early.Schedule(ctx, id, time.Now().Add(time.Hour), nil); err != nil {
				t.Fatalf("Schedule right after the creation: %v", err)
			}
		}
		if n, err := early.Inspect().Shards(ctx); err != nil || n != 16 {
			t.Fatalf("Shards after a refused write = %d, %v; want 16", n, err)
		}
		// A debounce, likewise: from a second early queue, still trusting
		// the one-shard layout.
		if _, err := debouncer.Debounce(ctx, "dk", queue.DebounceOptions{Delay: time.Hour, MaxWait: time.Hour}); err != nil {
			t.Fatalf("Debounce right after the creation: %v", err)
		}
		ids = append(ids, "dk")
		// The one-shard layout holds no timer in either layout: under
		// TIMERQ_TEST_LAYOUT=2 the queues' first read upgraded it, so its
		// legacy due key holds the marker, which is no data.
		old := keyspace.Shard(ns, 0, 1)
		oneShardKeys := func() int64 {
			t.Helper()
			n, err := b.Client.Exists(ctx, old.LegacyDue(), old.Sched(), old.Timers()).Result()
			if err != nil {
				t.Fatal(err)
			}
			if isMarker(t, b.Client, old.LegacyDue()) {
				n--
			}
			return n
		}
		if n := oneShardKeys(); n != 0 {
			t.Fatalf("the one-shard layout holds %d keys; want none", n)
		}
		fresh, err := queue.New(b.Client, queue.Options{Namespace: ns})
		if err != nil {
			t.Fatal(err)
		}
		defer fresh.Close()
		for _, id := range ids[:len(ids)-1] {
			if _, err := fresh.Get(ctx, id); err != nil {
				t.Fatalf("a fresh client's Get(%s): %v", id, err)
			}
		}
		if n, err := fresh.Stats(ctx); err != nil || n.Scheduled != int64(len(ids)) {
			t.Fatalf("a fresh client's Stats: %d scheduled (%v); want %d", n.Scheduled, err, len(ids))
		}
		created := time.Now()
		redistest.Eventually(t, 5*time.Second, "the idle queue to read 16 shards", func() bool {
			n, err := idle.Inspect().Shards(ctx)
			return err == nil && n == 16
		})
		if d := time.Since(created); d > 3*time.Second {
			t.Fatalf("the idle queue took %v to follow the creation; want about a second", d)
		}
		// Options.Shards pins one shard: every call fails rather than
		// writing where no worker claims.
		redistest.Eventually(t, 5*time.Second, "the pinned queue to refuse", func() bool {
			_, err := pinned.Schedule(ctx, "pinned", time.Now(), nil)
			return errors.Is(err, queue.ErrShardMismatch)
		})
		if n := oneShardKeys(); n != 0 {
			t.Fatalf("the pinned queue wrote %d one-shard keys", n)
		}
	})
}

// A consumer whose queue read the one-shard layout of a namespace not yet
// created reads the 16 shard streams once it is created with 16 shards:
// every fire reaches it.
func TestConsumeFollowsNamespaceCreatedLater(t *testing.T) {
	t.Parallel() // its own namespace on each backend; see docs/development.md, "Loops"
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		ns := redistest.Namespace(t)
		early, err := queue.New(b.Client, queue.Options{Namespace: ns})
		if err != nil {
			t.Fatal(err)
		}
		defer early.Close()
		// The queue reads the one-shard layout; Consume starts after the
		// creation, within the second the queue trusts what it read, so it
		// starts on the one-shard stream. (A consumer that ran before the
		// creation made that stream, and the creation would be refused.)
		if n, err := early.Inspect().Shards(ctx); err != nil || n != 1 {
			t.Fatalf("Shards = %d, %v; want 1", n, err)
		}
		if _, err := queue.CreateNamespace(ctx, b.Client, ns, 16); err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		got := map[string]bool{}
		stop := consumeAsync(t, early, "g", "c1", func(_ context.Context, e queue.Event) error {
			mu.Lock()
			got[e.ID] = true
			mu.Unlock()
			return nil
		}, queue.ConsumeOptions{Block: 50 * time.Millisecond})
		defer stop()
		fresh, err := queue.New(b.Client, queue.Options{Namespace: ns})
		if err != nil {
			t.Fatal(err)
		}
		defer fresh.Close()
		const n = 48
		var batch []queue.NewTimer
		for i := range n {
			batch = append(batch, queue.NewTimer{ID: fmt.Sprint("t-", i), Due: time.Now()})
		}
		if _, err := fresh.ScheduleBatch(ctx, batch); err != nil {
			t.Fatal(err)
		}
		for k := range 16 {
			if _, err := fresh.Engine().ClaimShard(ctx, k, 100); err != nil {
				t.Fatal(err)
			}
		}
		redistest.Eventually(t, 5*time.Second, "every fire to reach the consumer", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(got) == n
		})
	})
}
