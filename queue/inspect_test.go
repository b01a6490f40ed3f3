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

	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/queue"
)

// forEachLayout runs fn on a namespace of one shard (miniredis and a real
// server) and on sharded namespaces (forEachSharded: 4 shards on miniredis
// and a real server, 16 on the Cluster, where the streams are in different
// slots and ReadFires cannot block in one XREAD).
func forEachLayout(t *testing.T, fn func(t *testing.T, b *redistest.Backend)) {
	redistest.ForEach(t, fn)
	t.Run("sharded", func(t *testing.T) { forEachSharded(t, fn) })
}

// idInShard returns an ID with the given prefix that lives in shard k.
func idInShard(t *testing.T, q *queue.Queue, prefix string, k int) string {
	t.Helper()
	for i := range 10000 {
		id := fmt.Sprint(prefix, i)
		if got, err := q.Inspect().ShardOf(context.Background(), id); err != nil {
			t.Fatal(err)
		} else if got == k {
			return id
		}
	}
	t.Fatalf("no ID with prefix %q in shard %d", prefix, k)
	return ""
}

// checkShards fails unless every event names the shard its timer lives in.
func checkShards(t *testing.T, q *queue.Queue, evs []queue.Event) {
	t.Helper()
	for _, ev := range evs {
		if k, err := q.Inspect().ShardOf(context.Background(), ev.ID); err != nil || k != ev.Shard {
			t.Fatalf("event %s says shard %d; the timer lives in shard %d (%v)", ev.ID, ev.Shard, k, err)
		}
	}
}

// TestRecentAndReadFires: RecentFires gives the newest events of every
// shard first, and ReadFires follows every shard's stream from a cursor,
// each event once, in time order, waking for a fire while it blocks.
func TestRecentAndReadFires(t *testing.T) {
	forEachLayout(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		q := newQueue(t, b, queue.Options{})
		if evs, cur, err := q.Inspect().RecentFires(ctx, 5); err != nil || len(evs) != 0 {
			t.Fatalf("RecentFires on an empty namespace = %v, %q, %v; want none", evs, cur, err)
		}
		const n = 30
		fireN(t, q, "r", n)
		recent, cursor, err := q.Inspect().RecentFires(ctx, 5)
		if err != nil {
			t.Fatal(err)
		}
		if len(recent) != 5 || string(recent[0].Payload) == "" || recent[0].FiredAt.IsZero() {
			t.Fatalf("RecentFires(5) = %+v, want 5 events with payloads and times", recent)
		}
		checkShards(t, q, recent)
		for i := 1; i < len(recent); i++ {
			if recent[i].FiredAt.After(recent[i-1].FiredAt) {
				t.Fatalf("RecentFires is not newest first: %s fired after %s", recent[i].ID, recent[i-1].ID)
			}
		}

		// Pages of 7 from the start: every event once, in fire order, and
		// the newest five are the ones RecentFires gave.
		var all []queue.Event
		from := "0"
		for range n {
			res, err := q.ReadFires(ctx, queue.ReadFiresOptions{Limit: 7, Cursor: from})
			page, next := res.Events, res.NextCursor
			if err != nil {
				t.Fatal(err)
			}
			if len(page) == 0 {
				if next != from {
					t.Fatalf("an empty read moved the cursor from %q to %q", from, next)
				}
				break
			}
			all, from = append(all, page...), next
		}
		checkShards(t, q, all)
		var ids []string
		for i, ev := range all {
			ids = append(ids, ev.ID)
			if i > 0 && ev.FiredAt.Before(all[i-1].FiredAt) {
				t.Fatalf("ReadFires is not oldest first: %s fired before %s", ev.ID, all[i-1].ID)
			}
		}
		slices.Sort(ids)
		if len(ids) != n || len(slices.Compact(ids)) != n {
			t.Fatalf("ReadFires from 0 gave %d events (%d distinct), want each of %d once", len(all), len(slices.Compact(ids)), n)
		}
		for i, ev := range recent {
			if want := all[n-1-i]; ev.ID != want.ID || ev.StreamID != want.StreamID || ev.Shard != want.Shard {
				t.Fatalf("RecentFires[%d] = %s, want %s, the %d-th newest read", i, ev.ID, want.ID, i+1)
			}
		}
		if from != cursor {
			t.Fatalf("the cursor after reading everything is %q; RecentFires gave %q", from, cursor)
		}

		none, err := q.ReadFires(ctx, queue.ReadFiresOptions{Limit: 10, Cursor: cursor, Block: 10 * time.Millisecond})
		if err != nil || len(none.Events) != 0 || none.NextCursor != cursor {
			t.Fatalf("ReadFires after the newest = %+v, %v; want nothing and the same cursor", none, err)
		}
		fireN(t, q, "s", 3)
		// The zero Limit reads up to DefaultListLimit.
		page, err := q.ReadFires(ctx, queue.ReadFiresOptions{Cursor: cursor})
		if next := page.Events; err != nil || len(next) != 3 || !strings.HasPrefix(next[0].ID+next[1].ID+next[2].ID, "s") {
			t.Fatalf("ReadFires after the recent cursor = %+v, %v; want s0 s1 s2", next, err)
		}
		_, cursor, _ = q.Inspect().RecentFires(ctx, 1)

		// Blocking: a fire during the wait ends it.
		got := make(chan []queue.Event, 1)
		go func() {
			page, err := q.ReadFires(ctx, queue.ReadFiresOptions{Limit: 10, Cursor: cursor, Block: 10 * time.Second})
			if err != nil {
				t.Error(err)
			}
			got <- page.Events
		}()
		fireN(t, q, "w", 1)
		select {
		case evs := <-got:
			if len(evs) != 1 || evs[0].ID != "w0" {
				t.Fatalf("blocking ReadFires = %+v, want w0", evs)
			}
		case <-time.After(8 * time.Second):
			t.Fatal("a blocking ReadFires did not return the fire made while it waited")
		}

		for _, bad := range []string{"", "$", "x", "1-0,2-0,"} {
			if _, err := q.ReadFires(ctx, queue.ReadFiresOptions{Limit: 10, Cursor: bad}); !errors.Is(err, queue.ErrInvalidOptions) {
				t.Errorf("ReadFires(%q) = %v, want ErrInvalidOptions", bad, err)
			}
		}
		if b.Shards > 1 {
			if _, err := q.ReadFires(ctx, queue.ReadFiresOptions{Limit: 10, Cursor: "1700000000000-0"}); !errors.Is(err, queue.ErrInvalidOptions) {
				t.Errorf("ReadFires with one ID on %d shards = %v, want ErrInvalidOptions", b.Shards, err)
			}
		}
	})
}

// TestRequeue: a dead letter goes back to the group that gave up on it, on
// its own shard, as a fresh delivery; the other group acknowledges and
// skips it, the dead-letter stream loses it, and a second requeue reports
// it gone. The poisoned timer is put outside shard 0 on sharded namespaces.
func TestRequeue(t *testing.T) {
	forEachLayout(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		q := newQueue(t, b, queue.Options{})
		if gs, err := q.Inspect().Groups(ctx); err != nil || len(gs) != 0 {
			t.Fatalf("Groups without a stream = %v, %v; want none", gs, err)
		}
		good := idInShard(t, q, "ok-", 0)
		poison := idInShard(t, q, "poison-", max(b.Shards, 1)-1)
		var healed atomic.Bool
		var mu sync.Mutex
		seen := map[string][]string{} // group -> "id/attempt"
		handler := func(group string) func(context.Context, queue.Event) error {
			return func(_ context.Context, ev queue.Event) error {
				mu.Lock()
				seen[group] = append(seen[group], fmt.Sprintf("%s/%d", ev.ID, ev.Attempt))
				mu.Unlock()
				if group == "bad" && ev.ID == poison && !healed.Load() {
					return errors.New("poison")
				}
				return nil
			}
		}
		o := queue.ConsumeOptions{MaxAttempts: 2, RetryDelay: 10 * time.Millisecond, ClaimIdle: 5 * time.Second, Block: 20 * time.Millisecond}
		consumeAsync(t, q, "bad", "c1", handler("bad"), o)
		consumeAsync(t, q, "good", "c2", handler("good"), o)
		past := time.Now().Add(-time.Second)
		if _, err := q.ScheduleBatch(ctx, []queue.NewTimer{{ID: good, Due: past}, {ID: poison, Due: past.Add(time.Millisecond), Payload: []byte("p-1")}}); err != nil {
			t.Fatal(err)
		}
		if got := claimAll(t, q); len(got) != 2 {
			t.Fatalf("claimed %d, want 2", len(got))
		}

		var dls []queue.DeadLetter
		waitUntil(t, 5*time.Second, "a dead letter", func() bool {
			page, err := q.Deliveries().DeadLetters(ctx, queue.DeadLetterListOptions{Limit: 10})
			dls = page.DeadLetters
			if err != nil {
				t.Fatal(err)
			}
			return len(dls) == 1
		})
		dl := dls[0]
		if dl.Event.ID != poison || dl.Event.Shard != max(b.Shards, 1)-1 || dl.Group != "bad" || dl.Consumer != "c1" || dl.Attempts != 2 || dl.Error != "poison" || dl.FireStreamID == "" || string(dl.Event.Payload) != "p-1" {
			t.Fatalf("dead letter = %+v", dl)
		}
		if n, err := q.Deliveries().DeadLetterCount(ctx); err != nil || n != 1 {
			t.Fatalf("DeadLetterCount = %d, %v; want 1", n, err)
		}
		waitUntil(t, 5*time.Second, "both groups done", func() bool {
			gs, err := q.Inspect().Groups(ctx)
			if err != nil {
				t.Fatal(err)
			}
			return len(gs) == 2 && gs[0].Pending == 0 && gs[1].Pending == 0
		})
		gs, _ := q.Inspect().Groups(ctx)
		if gs[0].Name != "bad" || gs[1].Name != "good" || gs[0].Consumers != 1 || gs[0].LastDeliveredID == "" {
			t.Fatalf("Groups = %+v", gs)
		}
		wantLag := int64(0)
		if b.Mini != nil {
			wantLag = -1 // miniredis does not track what a group read: unknown
		}
		if gs[0].Lag != wantLag {
			t.Fatalf("Groups = %+v, want lag %d once everything is delivered", gs, wantLag)
		}

		if b.Shards > 1 {
			if _, err := q.Deliveries().Requeue(ctx, 0, dl.Event.StreamID); !errors.Is(err, queue.ErrDeadLetterNotFound) {
				t.Errorf("Requeue on the wrong shard = %v, want ErrDeadLetterNotFound", err)
			}
		}
		healed.Store(true)
		id, err := q.Deliveries().Requeue(ctx, dl.Event.Shard, dl.Event.StreamID)
		if err != nil || id == "" {
			t.Fatalf("Requeue = %q, %v", id, err)
		}
		waitUntil(t, 5*time.Second, "the requeued delivery", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(seen["bad"]) == 4
		})
		// Group good reads past the requeued entry and acknowledges it in
		// its shard's stream: had it been delivered there, its handler
		// would have seen it.
		waitUntil(t, 5*time.Second, "both groups to acknowledge the requeued entry", func() bool {
			gs, err := q.Inspect().Groups(ctx)
			if err != nil {
				t.Fatal(err)
			}
			return len(gs) == 2 && gs[0].Pending == 0 && gs[1].Pending == 0 && gs[1].LastDeliveredID == id
		})
		// Shards are consumed side by side, so only each timer's own
		// deliveries are in order.
		of := func(group, id string) string {
			mu.Lock()
			defer mu.Unlock()
			var out []string
			for _, d := range seen[group] {
				if strings.HasPrefix(d, id+"/") {
					out = append(out, strings.TrimPrefix(d, id+"/"))
				}
			}
			return strings.Join(out, " ")
		}
		if got := of("bad", poison); got != "1 2 1" {
			t.Errorf("group bad had %s delivered as attempts %s; want 1 2 1 (again as a first attempt after the requeue)", poison, got)
		}
		if got := of("good", poison); got != "1" {
			t.Errorf("group good had %s delivered as attempts %s, want 1: the requeue was not meant for it", poison, got)
		}
		if a, b := of("bad", good), of("good", good); a != "1" || b != "1" {
			t.Errorf("%s delivered as attempts %q to bad and %q to good, want once to each", good, a, b)
		}
		if n, _ := q.Deliveries().DeadLetterCount(ctx); n != 0 {
			t.Errorf("%d dead letters after requeue, want 0", n)
		}
		if _, err := q.Deliveries().Requeue(ctx, dl.Event.Shard, dl.Event.StreamID); !errors.Is(err, queue.ErrDeadLetterNotFound) {
			t.Errorf("second Requeue = %v, want ErrDeadLetterNotFound", err)
		}
		if _, err := q.Deliveries().Requeue(ctx, 0, "not-an-id"); !errors.Is(err, queue.ErrInvalidOptions) {
			t.Errorf("Requeue(not-an-id) = %v, want ErrInvalidOptions", err)
		}
		if _, err := q.Deliveries().Requeue(ctx, max(b.Shards, 1), dl.Event.StreamID); !errors.Is(err, queue.ErrInvalidOptions) {
			t.Errorf("Requeue on a shard past the last = %v, want ErrInvalidOptions", err)
		}
	})
}

// TestDeadLettersPaging: the cursor walks every shard's dead-letter stream
// in pages, oldest first, each entry once.
func TestDeadLettersPaging(t *testing.T) {
	forEachLayout(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		q := newQueue(t, b, queue.Options{})
		shards, err := q.Inspect().Shards(ctx)
		if err != nil {
			t.Fatal(err)
		}
		const n = 11
		for i := range n {
			// Entry i in shard i mod shards, at millisecond 1000+i: the
			// merged order is t0 … t10 whatever the shard count.
			args := &redis.XAddArgs{Stream: q.Keys().DeadLetter(i % shards), ID: fmt.Sprintf("%d-0", 1000+i),
				Values: []any{"id", fmt.Sprint("t", i), "due", "1", "fired", "2", "payload", "", "group", "g"}}
			if err := b.Client.XAdd(ctx, args).Err(); err != nil {
				t.Fatal(err)
			}
		}
		if c, err := q.Deliveries().DeadLetterCount(ctx); err != nil || c != n {
			t.Fatalf("DeadLetterCount = %d, %v; want %d", c, err, n)
		}
		var ids []string
		cursor := ""
		for pages := 0; ; pages++ {
			if pages > n {
				t.Fatal("paging does not end")
			}
			res, err := q.Deliveries().DeadLetters(ctx, queue.DeadLetterListOptions{Limit: 2, Cursor: cursor})
			page, next := res.DeadLetters, res.NextCursor
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range page {
				ids = append(ids, d.Event.ID)
				var i int
				fmt.Sscanf(d.Event.ID, "t%d", &i)
				if d.Event.Shard != i%shards {
					t.Fatalf("%s says shard %d, it is in %d", d.Event.ID, d.Event.Shard, i%shards)
				}
			}
			if next == "" {
				break
			}
			cursor = next
		}
		want := make([]string, n)
		for i := range want {
			want[i] = fmt.Sprint("t", i)
		}
		if fmt.Sprint(ids) != fmt.Sprint(want) {
			t.Errorf("paged dead letters = %v, want %v", ids, want)
		}
		if _, err := q.Deliveries().DeadLetters(ctx, queue.DeadLetterListOptions{Limit: 2, Cursor: "nonsense"}); !errors.Is(err, queue.ErrInvalidOptions) {
			t.Errorf("DeadLetters(nonsense) = %v, want ErrInvalidOptions", err)
		}
		// The zero options list the oldest DefaultListLimit (100): all 11.
		if res, err := q.Deliveries().DeadLetters(ctx, queue.DeadLetterListOptions{}); err != nil || len(res.DeadLetters) != n || res.NextCursor != "" {
			t.Errorf("DeadLetters with zero options = %d dead letters, next %q, %v; want all %d and no next page", len(res.DeadLetters), res.NextCursor, err, n)
		}
		if _, err := q.Deliveries().DeadLetters(ctx, queue.DeadLetterListOptions{Limit: queue.MaxBatch + 1}); !errors.Is(err, queue.ErrInvalidOptions) {
			t.Errorf("DeadLetters with Limit MaxBatch+1 = %v, want ErrInvalidOptions", err)
		}
	})
}

// TestGroupsSumShards: a group's lag and pending deliveries are summed over
// every shard's stream.
func TestGroupsSumShards(t *testing.T) {
	forEachLayout(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		q := newQueue(t, b, queue.Options{})
		shards := max(b.Shards, 1)
		const n = 20
		fireN(t, q, "g", n)
		var delivered int64
		for k := range shards {
			if err := b.Client.XGroupCreateMkStream(ctx, q.Keys().Stream(k), "idle", "0").Err(); err != nil {
				t.Fatal(err)
			}
			// Deliver one entry of each shard to a consumer, unacknowledged.
			res, err := b.Client.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "idle", Consumer: "c",
				Streams: []string{q.Keys().Stream(k), ">"}, Count: 1, Block: -1}).Result()
			if err != nil && !errors.Is(err, redis.Nil) {
				t.Fatal(err)
			}
			for _, s := range res {
				delivered += int64(len(s.Messages))
			}
		}
		gs, err := q.Inspect().Groups(ctx)
		if err != nil || len(gs) != 1 {
			t.Fatalf("Groups = %+v, %v", gs, err)
		}
		wantLag := n - delivered
		if b.Mini != nil {
			// miniredis does not track what a group read (entries-read
			// null) and gives the whole stream as its lag: unknown.
			wantLag = -1
		}
		if g := gs[0]; g.Pending != delivered || g.Consumers != 1 || g.Lag != wantLag {
			t.Fatalf("Groups = %+v; want pending %d and lag %d over %d shards", g, delivered, wantLag, shards)
		}
	})
}

// TestRecentFiresSkewed: when one shard holds most of the newest fires,
// RecentFires reads it again in larger rounds and still returns exactly the
// newest events: the reverse of the tail that ReadFires reads.
func TestRecentFiresSkewed(t *testing.T) {
	forEachSharded(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		q := newQueue(t, b, queue.Options{})
		var hot, cold []queue.NewTimer
		for i := 0; len(hot) < 150; i++ {
			id := fmt.Sprintf("h-%04d", i)
			switch k, _ := q.Inspect().ShardOf(ctx, id); {
			case k == 0:
				hot = append(hot, queue.NewTimer{ID: id, Due: time.Now().Add(-time.Second)})
			case k == 1 && len(cold) < 10:
				cold = append(cold, queue.NewTimer{ID: id, Due: time.Now().Add(-time.Second)})
			}
		}
		for _, batch := range [][]queue.NewTimer{cold[:5], hot[:50], cold[5:], hot[50:]} {
			if _, err := q.ScheduleBatch(ctx, batch); err != nil {
				t.Fatal(err)
			}
			claimAll(t, q)
		}
		page, err := q.ReadFires(ctx, queue.ReadFiresOptions{Limit: queue.MaxBatch, Cursor: "0"})
		all := page.Events
		if err != nil || len(all) != 160 {
			t.Fatalf("ReadFires = %d events, %v; want 160", len(all), err)
		}
		recent, _, err := q.Inspect().RecentFires(ctx, 100)
		if err != nil || len(recent) != 100 {
			t.Fatalf("RecentFires(100) = %d events, %v", len(recent), err)
		}
		for i, ev := range recent {
			if want := all[len(all)-1-i]; ev.ID != want.ID {
				t.Fatalf("RecentFires[%d] = %s, want %s (newest first)", i, ev.ID, want.ID)
			}
		}
	})
}

// TestDeadLettersPagingSkewed: dead letters crowded in one shard, then
// spread, then in another shard: every page size walks them oldest first,
// each once, and the last page says it is the last (no empty page after
// it), though each shard is read only for its share at first.
func TestDeadLettersPagingSkewed(t *testing.T) {
	forEachLayout(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		q := newQueue(t, b, queue.Options{})
		shards, err := q.Inspect().Shards(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// 40 in shard 0, then 20 round the shards, then 25 in the last.
		var want []string
		shardOf := func(i int) int {
			switch {
			case i < 40:
				return 0
			case i < 60:
				return i % shards
			}
			return shards - 1
		}
		for i := range 85 {
			id := fmt.Sprintf("t%02d", i)
			args := &redis.XAddArgs{Stream: q.Keys().DeadLetter(shardOf(i)), ID: fmt.Sprintf("%d-0", 1000+i),
				Values: []any{"id", id, "due", "1", "fired", "2", "payload", "", "group", "g"}}
			if err := b.Client.XAdd(ctx, args).Err(); err != nil {
				t.Fatal(err)
			}
			want = append(want, id)
		}
		for _, size := range []int{1, 7, 17, 85, 100} {
			var ids []string
			cursor := ""
			for pages := 0; ; pages++ {
				if pages > 85 {
					t.Fatal("paging does not end")
				}
				res, err := q.Deliveries().DeadLetters(ctx, queue.DeadLetterListOptions{Limit: size, Cursor: cursor})
				page, next := res.DeadLetters, res.NextCursor
				if err != nil {
					t.Fatal(err)
				}
				if len(page) == 0 || next != "" && len(page) != size {
					t.Fatalf("page size %d: a page of %d with next %q", size, len(page), next)
				}
				for _, d := range page {
					ids = append(ids, d.Event.ID)
					var i int
					fmt.Sscanf(d.Event.ID, "t%d", &i)
					if d.Event.Shard != shardOf(i) {
						t.Fatalf("%s says shard %d, it is in %d", d.Event.ID, d.Event.Shard, shardOf(i))
					}
				}
				if next == "" {
					break
				}
				cursor = next
			}
			if fmt.Sprint(ids) != fmt.Sprint(want) {
				t.Errorf("page size %d: paged dead letters = %v, want %v", size, ids, want)
			}
		}
	})
}
