package poller_test

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/timerq/timerq/internal/keyspace"
	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/poller"
	"github.com/timerq/timerq/queue"
)

// Rendezvous hashing gives each shard to exactly one member, spreads them,
// and moves only a leaving member's shards.
func TestOwnedSharesEveryShardOnce(t *testing.T) {
	const shards = 64
	members := []string{"w-a", "w-b", "w-c"}
	owner := map[int]string{}
	for _, m := range members {
		got := poller.Owned(members, shards, m)
		if len(got) < shards/3/2 {
			t.Errorf("%s owns %d of %d shards: badly spread", m, len(got), shards)
		}
		for _, k := range got {
			if o, dup := owner[k]; dup {
				t.Fatalf("shard %d owned by %s and %s", k, o, m)
			}
			owner[k] = m
		}
	}
	if len(owner) != shards {
		t.Fatalf("%d of %d shards owned", len(owner), shards)
	}
	rest := []string{"w-a", "w-c"}
	for _, m := range rest {
		for _, k := range poller.Owned(rest, shards, m) {
			if owner[k] != m && owner[k] != "w-b" {
				t.Fatalf("shard %d moved from %s to %s though only w-b left", k, owner[k], m)
			}
		}
	}
	if got := poller.Owned(members, shards, "stranger"); len(got) != 0 {
		t.Fatalf("a non-member owns %v", got)
	}
}

// newShardedQueue creates a namespace of n shards and a queue of it.
func newShardedQueue(t *testing.T, rdb redis.UniversalClient, n int) *queue.Queue {
	t.Helper()
	ns := redistest.Namespace(t)
	if _, err := queue.CreateNamespace(context.Background(), rdb, ns, n); err != nil {
		t.Fatal(err)
	}
	return newQueue(t, rdb, ns)
}

// Two pollers split a 16-shard namespace between them, fire every timer
// once, and when one stops the other takes every shard.
//
// MemberTTL is far longer than any stall of a loaded machine: with 300 ms,
// a heartbeat delayed behind slow miniredis claims let a membership lapse,
// and the pollers took turns owning every shard instead of splitting them.
// Nothing here waits for a TTL to run out: a stopped poller leaves, and the
// ghost below lapses when the test moves its expiry to the present.
func TestPollersShareShards(t *testing.T) {
	_, rdb := redistest.Mini(t)
	ctx := context.Background()
	q := newShardedQueue(t, rdb, 16)
	opts := poller.Options{
		Heartbeat: 50 * time.Millisecond, MemberTTL: time.Hour,
		MaxPollInterval: 50 * time.Millisecond,
		Maintenance:     poller.MaintenanceOptions{Disabled: true},
	}
	opts.WorkerID = "one"
	p1, err := poller.New(q, opts)
	if err != nil {
		t.Fatal(err)
	}
	opts.WorkerID = "two"
	p2, err := poller.New(q, opts)
	if err != nil {
		t.Fatal(err)
	}
	stop1 := start(t, p1)
	start(t, p2)
	waitFor(t, 3*time.Second, "the pollers to split the shards", func() bool {
		a, b := p1.OwnedShards(), p2.OwnedShards()
		all := slices.Sorted(slices.Values(append(append([]int(nil), a...), b...)))
		return len(a) > 0 && len(b) > 0 && slices.Equal(all, []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15})
	})
	// Enough timers for every shard to hold some, few enough for
	// miniredis's slow Lua under -race on a loaded machine.
	const n = 160
	var batch []queue.NewTimer
	for i := range n {
		batch = append(batch, queue.NewTimer{ID: fmt.Sprint("s-", i), Due: time.Now()})
	}
	if _, err := q.ScheduleBatch(ctx, batch); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "every timer to fire", func() bool {
		st, err := q.Stats(ctx)
		return err == nil && st.Fired == n
	})
	seen := map[string]int{}
	for k := range 16 {
		entries, err := rdb.XRange(ctx, q.Keys().Stream(k), "-", "+").Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			seen[e.Values["id"].(string)]++
		}
	}
	for _, tm := range batch {
		if seen[tm.ID] != 1 {
			t.Fatalf("%s fired %d times", tm.ID, seen[tm.ID])
		}
	}
	stop1()
	waitFor(t, 2*time.Second, "the other poller to take every shard", func() bool { return len(p2.OwnedShards()) == 16 })

	// A member that stops heartbeating without leaving (a crash) keeps its
	// shards only until its membership expires. The ghost's expiry is an
	// hour away until the test moves it to the server's present: a real
	// lapse, without betting that a loaded machine heartbeats within some
	// wall-clock window before it.
	ghost := keyspace.Namespace(q.Namespace()).Workers()
	now, err := rdb.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	if err := rdb.ZAdd(ctx, ghost, redis.Z{Score: float64(now.Add(time.Hour).UnixMilli()), Member: "ghost"}).Err(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "the ghost to take some shards", func() bool { return len(p2.OwnedShards()) < 16 })
	if now, err = rdb.Time(ctx).Result(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.ZAdd(ctx, ghost, redis.Z{Score: float64(now.UnixMilli()), Member: "ghost"}).Err(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "the ghost's shards to come back", func() bool { return len(p2.OwnedShards()) == 16 })
}

// Options.FixedShards pins a poller to chosen shards, without membership; shards
// the namespace lacks are ignored.
func TestPollerFixedShards(t *testing.T) {
	_, rdb := redistest.Mini(t)
	ctx := context.Background()
	q := newShardedQueue(t, rdb, 4)
	var claims atomic.Int64
	p, err := poller.New(q, poller.Options{FixedShards: []int{3, 1, 9}, MaxPollInterval: 50 * time.Millisecond,
		Maintenance: poller.MaintenanceOptions{Disabled: true},
		Hooks:       poller.Hooks{Claimed: func(queue.ClaimResult) { claims.Add(1) }}})
	if err != nil {
		t.Fatal(err)
	}
	start(t, p)
	waitFor(t, 2*time.Second, "the fixed shards", func() bool { return slices.Equal(p.OwnedShards(), []int{1, 3}) })
	var ids [4]string
	for i := 0; ids[0] == "" || ids[1] == "" || ids[2] == "" || ids[3] == ""; i++ {
		id := fmt.Sprint("f-", i)
		k, _ := q.Inspect().ShardOf(ctx, id)
		if ids[k] == "" {
			ids[k] = id
			if _, err := q.Schedule(ctx, id, time.Now(), nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	waitFor(t, 2*time.Second, "shards 1 and 3 to fire", func() bool {
		a, _ := q.Get(ctx, ids[1])
		b, _ := q.Get(ctx, ids[3])
		return a.State == queue.StateFired && b.State == queue.StateFired
	})
	// Eight more claims (about four per owned shard): had the poller
	// claimed shards 0 or 2 too, their due timers would have fired by now.
	after := claims.Load()
	waitFor(t, 2*time.Second, "more claims", func() bool { return claims.Load() >= after+8 })
	for _, k := range []int{0, 2} {
		if tm, _ := q.Get(ctx, ids[k]); tm.State != queue.StateScheduled {
			t.Fatalf("shard %d's timer is %s; the poller does not own that shard", k, tm.State)
		}
	}
	if n, _ := rdb.Exists(ctx, keyspace.Namespace(q.Namespace()).Workers()).Result(); n != 0 {
		t.Fatal("a poller with fixed shards joined the membership")
	}
}

// A poller with no shard to own (more workers than shards) stays ready: its
// heartbeats count as proof that Redis answers.
func TestPollerWithoutShardsStaysReady(t *testing.T) {
	_, rdb := redistest.Mini(t)
	q := newShardedQueue(t, rdb, 2)
	opts := poller.Options{Heartbeat: 50 * time.Millisecond, MemberTTL: 300 * time.Millisecond,
		Maintenance: poller.MaintenanceOptions{Disabled: true}}
	var ps []*poller.Poller
	for i := range 6 {
		opts.WorkerID = fmt.Sprint("w", i)
		p, err := poller.New(q, opts)
		if err != nil {
			t.Fatal(err)
		}
		start(t, p)
		ps = append(ps, p)
	}
	waitFor(t, 3*time.Second, "two shards owned among six pollers", func() bool {
		n := 0
		for _, p := range ps {
			n += len(p.OwnedShards())
		}
		return n == 2
	})
	// Every poller, owning a shard or not, proves Redis answers again after
	// ownership settled.
	settled := time.Now()
	waitFor(t, 3*time.Second, "every poller to claim or heartbeat", func() bool {
		for _, p := range ps {
			if !p.LastClaim().After(settled) {
				return false
			}
		}
		return true
	})
	for _, p := range ps {
		if time.Since(p.LastClaim()) > time.Second {
			t.Errorf("%s (owning %v) last claimed %v ago: not ready", p.WorkerID(), p.OwnedShards(), time.Since(p.LastClaim()))
		}
	}
}
