package queue_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/timerq/timerq/internal/keyspace"
	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/queue"
)

// forEachSharded runs fn on miniredis and a real server with a namespace of
// 4 shards, and on the shared 3-master Cluster with 16.
func forEachSharded(t *testing.T, fn func(t *testing.T, b *redistest.Backend)) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		b.Shards = 4
		fn(t, b)
	})
	t.Run("cluster16", func(t *testing.T) {
		c := redistest.SharedCluster(t)
		fn(t, &redistest.Backend{Name: "cluster16", Client: c.Client(t), Cluster: c, Shards: 16})
	})
}

// oneSchedulePerShard returns schedule IDs, the k-th of which lives in
// shard k of a namespace of shards shards.
func oneSchedulePerShard(prefix string, shards int) []string {
	ids := make([]string, shards)
	for i, left := 0, shards; left > 0; i++ {
		id := fmt.Sprint(prefix, i)
		if k := keyspace.ScheduleShard(id, shards); ids[k] == "" {
			ids[k] = id
			left--
		}
	}
	return ids
}

// inShard asserts that the schedule id is in shard k's schedules hash and
// in no other shard's, and that its pending occurrences are timers of
// shard k.
func inShard(t *testing.T, b *redistest.Backend, q *queue.Queue, k int, info queue.RecurringInfo) {
	t.Helper()
	ctx := context.Background()
	for j := range b.Shards {
		ok, err := b.Client.HExists(ctx, q.Keys().Recurring(j)[0], info.ID).Result()
		if err != nil || ok != (j == k) {
			t.Fatalf("schedule %q in shard %d's schedules hash: %v, %v; it belongs to shard %d", info.ID, j, ok, err, k)
		}
	}
	for _, o := range info.Pending {
		if got, err := q.Inspect().ShardOf(ctx, o.ID); err != nil || got != k {
			t.Fatalf("occurrence %s routed to shard %d (%v), its schedule is in %d", o.ID, got, err, k)
		}
		if _, err := b.Client.ZScore(ctx, q.Keys().Shard(k)[0], o.ID).Result(); err != nil {
			t.Fatalf("occurrence %s is not in shard %d's due set: %v", o.ID, k, err)
		}
		if tm, err := q.Get(ctx, o.ID); err != nil || tm.State != queue.StateScheduled || !tm.Due.Equal(o.Due) {
			t.Fatalf("Get(%s) = %+v, %v", o.ID, tm, err)
		}
	}
}

// In a sharded namespace a schedule lives in the shard of its ID with its
// occurrences, and every operation finds it there: put, fire and arm,
// pause, resume, update, delete, get and list.
func TestRecurringOnShardedNamespace(t *testing.T) {
	t.Parallel() // its own namespace on each backend; see docs/development.md, "Loops"
	forEachSharded(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		q := newQueue(t, b, queue.Options{})
		c := newClock(b, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
		const every = 200 * time.Millisecond
		ids := oneSchedulePerShard("s", b.Shards)
		anchors := map[string]time.Time{}
		for k, id := range ids {
			// The test wants an unbroken series, so it asks for CatchUpAll:
			// on a real clock a round over 16 shards of a loaded machine can
			// take longer than the interval, and the default CatchUpOnce
			// then drops all but the latest of the occurrences that came
			// due before the arm (the product's promise, see
			// docs/development.md). The limit covers a 10 s stall.
			info, created, err := q.Recurring().Put(ctx, queue.Recurring{ID: id, Every: every, Payload: []byte(id), CatchUp: queue.CatchUpAll, CatchUpLimit: 50})
			if err != nil || !created || len(info.Pending) != queue.DefaultAhead {
				t.Fatalf("PutRecurring(%s) = %+v, %v, %v", id, info, created, err)
			}
			if got, err := q.Engine().ScheduleShard(ctx, id); err != nil || got != k {
				t.Fatalf("ScheduleShard(%s) = %d, %v; want %d", id, got, err, k)
			}
			inShard(t, b, q, k, info)
			anchors[id] = info.Anchor
		}

		fired := map[string]int{}
		for range 3 {
			c.advance(every)
			for _, f := range fireAndArm(t, q) {
				sid, _, ok := queue.ParseOccurrenceID(f.ID)
				if !ok || string(f.Payload) != sid || f.FiredAt.Before(f.Due) {
					t.Fatalf("fired %+v", f)
				}
				fired[f.ID]++
			}
		}
		for k, id := range ids {
			n := 0
			for j := 1; fired[queue.OccurrenceID(id, anchors[id].Add(time.Duration(j)*every))] == 1; j++ {
				n++
			}
			info := getRec(t, q, id)
			// At least Ahead armed, and every armed one counted. More than
			// Ahead is right when a round took longer than the interval on
			// a real clock: the arm then also catches up the occurrences
			// that came due meanwhile (CatchUpAll), as on cluster16.
			if n < 3 || len(info.Pending) < queue.DefaultAhead || info.Count != int64(n+len(info.Pending)) {
				t.Fatalf("%s: %d occurrences fired in series (%v); pending %v, count %d; want >= 3, then at least %d armed, each counted",
					id, n, fired, nominals(info.Pending), info.Count, queue.DefaultAhead)
			}
			inShard(t, b, q, k, info)
		}
		for id, n := range fired {
			if n != 1 {
				t.Fatalf("%s fired %d times", id, n)
			}
		}

		// Pause and resume.
		paused, err := q.Recurring().Pause(ctx, ids[0])
		if err != nil || paused.State != queue.RecurringPaused || len(paused.Pending) != 0 {
			t.Fatalf("PauseRecurring = %+v, %v", paused, err)
		}
		before := getRec(t, q, ids[0])
		resumed, err := q.Recurring().Resume(ctx, ids[0])
		if err != nil || resumed.State != queue.RecurringActive || len(resumed.Pending) != queue.DefaultAhead {
			t.Fatalf("ResumeRecurring = %+v, %v (before: %+v)", resumed, err, before)
		}
		inShard(t, b, q, 0, resumed)

		// Update the schedule of the last shard but one (shard 0 if S = 1).
		up := max(len(ids)-2, 0)
		updated, err := q.Recurring().Update(ctx, queue.Recurring{ID: ids[up], Every: time.Hour, Payload: []byte("new")})
		if err != nil || updated.Every != time.Hour || len(updated.Pending) != queue.DefaultAhead {
			t.Fatalf("UpdateRecurring = %+v, %v", updated, err)
		}
		if d := updated.Pending[1].Nominal.Sub(updated.Pending[0].Nominal); d != time.Hour {
			t.Fatalf("updated occurrences %v apart, want 1h", d)
		}
		inShard(t, b, q, up, updated)

		// Delete the last shard's: its pending occurrences are cancelled.
		last := len(ids) - 1
		gone := getRec(t, q, ids[last])
		if err := q.Recurring().Delete(ctx, ids[last]); err != nil {
			t.Fatal(err)
		}
		if _, err := q.Recurring().Get(ctx, ids[last]); !errors.Is(err, queue.ErrRecurringNotFound) {
			t.Fatalf("GetRecurring after delete = %v", err)
		}
		for _, o := range gone.Pending {
			if tm, err := q.Get(ctx, o.ID); err != nil || tm.State != queue.StateCancelled {
				t.Fatalf("occurrence %s of the deleted schedule: %+v, %v; want cancelled", o.ID, tm, err)
			}
		}

		// Only shards with active schedules need a repair pass.
		active, err := q.Engine().ScheduleShards(ctx, nil)
		if err != nil || len(active) != len(ids)-1 || slices.Contains(active, last) {
			t.Fatalf("ScheduleShards = %v, %v; want every shard but %d, whose schedule was deleted", active, err, last)
		}
		if got, err := q.Engine().ScheduleShards(ctx, []int{last, 0}); err != nil || !slices.Equal(got, []int{0}) {
			t.Fatalf("ScheduleShards(%d, 0) = %v, %v; want [0]", last, got, err)
		}

		// List pages over every shard, each schedule once.
		listed := map[string]int{}
		cursor, pages := "", 0
		for ; pages < 10*len(ids); pages++ {
			page, err := q.Recurring().List(ctx, queue.RecurringListOptions{Limit: 1, Cursor: cursor})
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range page.Schedules {
				listed[s.ID]++
			}
			if page.NextCursor != "" && !strings.Contains(page.NextCursor, ":") {
				t.Fatalf("cursor %q of a sharded namespace names no shard", page.NextCursor)
			}
			if cursor = page.NextCursor; cursor == "" {
				break
			}
		}
		if len(listed) != len(ids)-1 || pages < len(ids)-2 {
			t.Fatalf("listed %v in %d pages; want the %d schedules left, about one a page", listed, pages+1, len(ids)-1)
		}
		for id, n := range listed {
			if n != 1 || id == ids[last] {
				t.Fatalf("listed %s %d times (deleted: %s)", id, n, ids[last])
			}
		}
		for _, bad := range []string{"0", fmt.Sprint(b.Shards, ":0"), "x:1", "-1:0"} {
			if _, err := q.Recurring().List(ctx, queue.RecurringListOptions{Limit: 10, Cursor: bad}); !errors.Is(err, queue.ErrInvalidOptions) {
				t.Fatalf("ListRecurring(cursor %q) = %v, want ErrInvalidOptions", bad, err)
			}
		}
	})
}

// The repair pass of one shard arms the schedules of that shard whose
// firing worker died before arming, and only those.
func TestRecurringRepairOnShardedNamespace(t *testing.T) {
	t.Parallel() // its own namespace on each backend; see docs/development.md, "Loops"
	forEachSharded(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		q := newQueue(t, b, queue.Options{})
		c := newClock(b, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
		ids := oneSchedulePerShard("r", b.Shards)
		for _, id := range ids {
			if _, _, err := q.Recurring().Put(ctx, queue.Recurring{ID: id, Every: time.Second, Ahead: 1}); err != nil {
				t.Fatal(err)
			}
		}
		// Workers fire every first occurrence and die before arming.
		c.advance(time.Second)
		if fired := claimAll(t, q); len(fired) != len(ids) {
			t.Fatalf("fired %d occurrences, want one per schedule (%d)", len(fired), len(ids))
		}
		for _, id := range ids {
			if info := getRec(t, q, id); len(info.Pending) != 0 || info.Count != 1 {
				t.Fatalf("%s: pending %v count %d after the crash", id, nominals(info.Pending), info.Count)
			}
		}
		if n, _, err := q.Engine().RepairRecurring(ctx, 100, time.Hour); err != nil || n != 0 {
			t.Fatalf("repair within the grace armed %d, %v", n, err)
		}
		c.advance(100 * time.Millisecond)
		for k := range ids {
			n, more, err := q.Engine().RepairRecurringShard(ctx, k, 100, 50*time.Millisecond)
			// On a real clock the loop itself takes time: by a late shard
			// another interval may have passed, and the default catch-up
			// (CatchUpOnce) then arms the missed occurrence beside the next.
			// So the count is checked against what the schedule now holds.
			if err != nil || n < 1 || more {
				t.Fatalf("repair of shard %d armed %d (more %v), %v; want its one schedule's next", k, n, more, err)
			}
			for j, other := range ids {
				got := len(getRec(t, q, other).Pending)
				switch {
				case j == k && got != n:
					t.Fatalf("repair of shard %d armed %d, but %s holds %d pending", k, n, other, got)
				case j < k && got < 1:
					t.Fatalf("after repairing shards 0..%d, %s (shard %d) has no pending", k, other, j)
				case j > k && got != 0:
					t.Fatalf("repairing shards 0..%d armed %d of %s (shard %d), which it must not touch", k, got, other, j)
				}
			}
		}
		if n, more, err := q.Engine().RepairRecurring(ctx, 100, 50*time.Millisecond); err != nil || n != 0 || more {
			t.Fatalf("a second repair of every shard armed %d (more %v), %v; want nothing", n, more, err)
		}
		if _, _, err := q.Engine().RepairRecurringShard(ctx, b.Shards, 100, 0); !errors.Is(err, queue.ErrInvalidOptions) {
			t.Fatalf("repair of shard %d of %d = %v, want ErrInvalidOptions", b.Shards, b.Shards, err)
		}
	})
}

// A namespace whose only data is recurring schedules (every occurrence
// purged, say) is not unsharded-empty: making it sharded would strand them,
// so CreateNamespace refuses, naming the key.
func TestCreateNamespaceRefusesOverUnshardedSchedules(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		q := newQueue(t, b, queue.Options{Retention: queue.KeepForever})
		if _, _, err := q.Recurring().Put(ctx, queue.Recurring{ID: "left", Every: time.Hour}); err != nil {
			t.Fatal(err)
		}
		// Leave only the schedule keys, as if every occurrence was purged.
		if err := b.Client.Del(ctx, q.Keys().Shard(0)...).Err(); err != nil {
			t.Fatal(err)
		}
		_, err := queue.CreateNamespace(ctx, b.Client, q.Namespace(), 4)
		// The script's code (TIMERQ_INUSE) is matched and left out of the text.
		if !errors.Is(err, queue.ErrShardMismatch) || !strings.Contains(err.Error(), "}:sched") || strings.Contains(err.Error(), "INUSE") {
			t.Fatalf("CreateNamespace(4) over unsharded schedules = %v, want ErrShardMismatch naming the key", err)
		}
		if _, err := queue.CreateNamespace(ctx, b.Client, q.Namespace(), 1); err != nil {
			t.Fatalf("CreateNamespace(1) = %v", err)
		}
	})
}
