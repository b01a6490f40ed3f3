package queue_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/timerq/timerq/internal/keyspace"
	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/queue"
)

func TestCreateNamespaceStoresShardsAndRefusesChanges(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		ns := redistest.Namespace(t)
		created, err := queue.CreateNamespace(ctx, b.Client, ns, 16)
		if err != nil || !created {
			t.Fatalf("CreateNamespace = %v, %v", created, err)
		}
		if created, err := queue.CreateNamespace(ctx, b.Client, ns, 16); err != nil || created {
			t.Fatalf("creating again = %v, %v; want a no-op", created, err)
		}
		if _, err := queue.CreateNamespace(ctx, b.Client, ns, 8); !errors.Is(err, queue.ErrShardMismatch) {
			t.Fatalf("changing S = %v, want ErrShardMismatch", err)
		}
		// A client that reads S, one that agrees, one that does not.
		for _, c := range []struct {
			shards int
			ok     bool
		}{{0, true}, {16, true}, {4, false}, {1, false}} {
			q, err := queue.New(b.Client, queue.Options{Namespace: ns, Shards: c.shards})
			if err != nil {
				t.Fatal(err)
			}
			n, err := q.Inspect().Shards(ctx)
			_, serr := q.Schedule(ctx, "a", time.Now().Add(time.Hour), nil)
			if c.ok != (err == nil) || c.ok != (serr == nil) || !c.ok && (!errors.Is(err, queue.ErrShardMismatch) || !errors.Is(serr, queue.ErrShardMismatch)) {
				t.Fatalf("Shards %d: Shards() = %d, %v; Schedule = %v", c.shards, n, err, serr)
			}
			if c.ok && n != 16 {
				t.Fatalf("Shards() = %d, want 16", n)
			}
			q.Close()
		}
		// An uncreated namespace has the default, one shard, and keeps
		// today's names; once it holds timers it cannot become sharded.
		old := redistest.Namespace(t) + "-old"
		q, _ := queue.New(b.Client, queue.Options{Namespace: old})
		defer q.Close()
		if _, err := q.Schedule(ctx, "a", time.Now().Add(time.Hour), nil); err != nil {
			t.Fatal(err)
		}
		// Its due set is layout 1's, or layout 2's sched set once
		// upgraded (TIMERQ_TEST_LAYOUT=2).
		due := map[int]string{1: "timerq:{" + old + "}:due", 2: "timerq:{" + old + "}:sched"}[spaceAt(t, b.Client, q, 0).Layout()]
		if n, _ := q.Inspect().Shards(ctx); n != queue.DefaultShards || q.Keys().Shard(0)[0] != due {
			t.Fatalf("uncreated namespace: %d shards, keys %v, want the due set %s", n, q.Keys().Shard(0), due)
		}
		if _, err := queue.CreateNamespace(ctx, b.Client, old, 4); !errors.Is(err, queue.ErrShardMismatch) || !errors.Is(err, queue.ErrNamespaceInUse) || !strings.Contains(err.Error(), "Restore") {
			t.Fatalf("sharding a used namespace = %v, want ErrShardMismatch with a way out", err)
		}
		if created, err := queue.CreateNamespace(ctx, b.Client, old, 1); err != nil || !created {
			t.Fatalf("recording S=1 for a used namespace = %v, %v", created, err)
		}
		for _, bad := range []int{0, -1, queue.MaxShards + 1} {
			if _, err := queue.CreateNamespace(ctx, b.Client, ns+"x", bad); !errors.Is(err, queue.ErrInvalidOptions) {
				t.Fatalf("CreateNamespace(%d) = %v", bad, err)
			}
		}
	})
}

// Shard keys and channels must agree with the server's own slot function.
func TestKeyspaceSlotsMatchTheCluster(t *testing.T) {
	c := redistest.SharedCluster(t)
	rdb := c.Client(t)
	ctx := context.Background()
	for _, s := range keyspace.Shards("slots", 16) {
		for _, name := range append(s.Keys(), s.Wake(), s.TimerChannel("x")) {
			want, err := rdb.ClusterKeySlot(ctx, name).Result()
			if err != nil {
				t.Fatal(err)
			}
			if got := keyspace.Slot(name); int64(got) != want {
				t.Fatalf("Slot(%q) = %d, CLUSTER KEYSLOT says %d", name, got, want)
			}
		}
	}
}

// A 16-shard namespace spreads its keys over every master, and each master
// fires some of its timers.
func TestShardedNamespaceSpreadsOverEveryMaster(t *testing.T) {
	c := redistest.SharedCluster(t)
	rdb := c.Client(t)
	ctx := context.Background()
	ns := redistest.Namespace(t)
	if _, err := queue.CreateNamespace(ctx, rdb, ns, 16); err != nil {
		t.Fatal(err)
	}
	q, err := queue.New(rdb, queue.Options{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	const n = 2000
	batch := make([]queue.NewTimer, n)
	for i := range batch {
		batch[i] = queue.NewTimer{ID: fmt.Sprint("spread-", i), Due: time.Now().Add(-time.Second)}
	}
	res, err := q.ScheduleBatch(ctx, batch)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if !r.Created || r.Timer.ID != batch[i].ID {
			t.Fatalf("result %d = %+v, want %s created, in batch order", i, r, batch[i].ID)
		}
	}
	before := firesPerMaster(t, c)
	if fired := claimAll(t, q); len(fired) != n {
		t.Fatalf("fired %d of %d", len(fired), n)
	}
	after := firesPerMaster(t, c)
	for _, s := range c.Nodes {
		cl := redis.NewClient(&redis.Options{Addr: s.Addr()})
		keys, err := cl.Keys(ctx, keyspace.Namespace(ns).Pattern()).Result()
		cl.Close()
		if err != nil {
			t.Fatal(err)
		}
		if len(keys) == 0 {
			t.Errorf("master %s holds none of the namespace's keys", s.Addr())
		}
		if after[s.Addr()] == before[s.Addr()] {
			t.Errorf("master %s fired nothing", s.Addr())
		}
	}
	st, err := q.Stats(ctx)
	if err != nil || st.Fired != n || len(st.Shards) != 16 {
		t.Fatalf("Stats = %+v, %v", st, err)
	}
	for k, s := range st.Shards {
		if s.Fired == 0 {
			t.Errorf("shard %d fired nothing of %d", k, n)
		}
	}
}

// firesPerMaster reads how many times each master ran EVALSHA.
func firesPerMaster(t *testing.T, c *redistest.Cluster) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	for _, s := range c.Nodes {
		cl := redis.NewClient(&redis.Options{Addr: s.Addr()})
		info, err := cl.Info(context.Background(), "commandstats").Result()
		cl.Close()
		if err != nil {
			t.Fatal(err)
		}
		// Claims run as Redis functions (FCALL) or scripts (EVALSHA).
		for _, line := range strings.Split(info, "\n") {
			for _, prefix := range []string{"cmdstat_evalsha:calls=", "cmdstat_fcall:calls="} {
				if strings.HasPrefix(line, prefix) {
					var calls int64
					fmt.Sscanf(strings.TrimPrefix(line, prefix), "%d", &calls)
					out[s.Addr()] += calls
				}
			}
		}
	}
	return out
}

// pubsubConn is a connection subscribed to channels (sub=) or shard
// channels (ssub=), from a master's CLIENT LIST.
type pubsubConn struct {
	node, id string
	channels int
}

func pubsubConns(t *testing.T, c *redistest.Cluster) []pubsubConn {
	t.Helper()
	var out []pubsubConn
	for _, s := range c.Nodes {
		cl := redis.NewClient(&redis.Options{Addr: s.Addr()})
		list, err := cl.ClientList(context.Background()).Result()
		cl.Close()
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(list, "\n") {
			pc := pubsubConn{node: s.Addr()}
			for _, f := range strings.Fields(line) {
				k, v, _ := strings.Cut(f, "=")
				switch k {
				case "id":
					pc.id = v
				case "sub", "ssub":
					n, _ := strconv.Atoi(v)
					pc.channels += n
				}
			}
			if pc.channels > 0 {
				out = append(out, pc)
			}
		}
	}
	return out
}

// subscribedChannels sums the channels of conns, skipping those in except
// (by node/id).
func subscribedChannels(conns []pubsubConn, except map[string]bool) int {
	n := 0
	for _, pc := range conns {
		if !except[pc.node+"/"+pc.id] {
			n += pc.channels
		}
	}
	return n
}

// Waiters of timers on every master wake, over at most one pub/sub
// connection per master, in both pub/sub flavours.
func TestWaitersWakeAcrossNodes(t *testing.T) {
	c := redistest.SharedCluster(t)
	for _, mode := range []queue.PubSubMode{queue.PubSubSharded, queue.PubSubClassic} {
		t.Run(fmt.Sprint("mode", mode), func(t *testing.T) {
			rdb := c.Client(t)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			ns := redistest.Namespace(t)
			if _, err := queue.CreateNamespace(ctx, rdb, ns, 16); err != nil {
				t.Fatal(err)
			}
			q, err := queue.New(rdb, queue.Options{Namespace: ns, PubSub: mode, RecheckInterval: time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			defer q.Close()
			if sharded, _ := q.Engine().ShardedPubSub(ctx); sharded != (mode == queue.PubSubSharded) {
				t.Fatalf("sharded = %v in mode %d", sharded, mode)
			}
			const n = 300
			batch := make([]queue.NewTimer, n)
			for i := range batch {
				batch[i] = queue.NewTimer{ID: fmt.Sprint("w-", i), Due: time.Now().Add(time.Hour)}
			}
			if _, err := q.ScheduleBatch(ctx, batch); err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			errs := make(chan error, n)
			for _, tm := range batch {
				wg.Go(func() { errs <- q.Wait(ctx, tm.ID) })
			}
			// Subscribed: RecheckInterval is an hour, so only messages wake them.
			var subs []pubsubConn
			redistest.Eventually(t, 10*time.Second, "every waiter's subscription", func() bool {
				subs = pubsubConns(t, c)
				return subscribedChannels(subs, nil) == n
			})
			conns := len(subs)
			perNode := map[string]int{}
			for _, sc := range subs {
				perNode[sc.node]++
			}
			for node, got := range perNode {
				if got > 1 {
					t.Errorf("master %s has %d pub/sub connections", node, got)
				}
			}
			if want := 3; mode == queue.PubSubSharded && conns != want || mode == queue.PubSubClassic && conns != 1 {
				t.Errorf("%d pub/sub connections in all", conns)
			}
			// Drop every pub/sub connection: go-redis reconnects and
			// resubscribes all of a connection's shard channels in one
			// SSUBSCRIBE, which Redis refuses with CROSSSLOT when they span
			// slots; the hub must notice and resubscribe slot by slot, or
			// these waiters would only wake at the hourly recheck.
			for _, s := range c.Nodes {
				cl := redis.NewClient(&redis.Options{Addr: s.Addr()})
				err := cl.ClientKillByFilter(ctx, "TYPE", "pubsub").Err()
				cl.Close()
				if err != nil {
					t.Fatal(err)
				}
			}
			// Wait for new connections to carry every channel again.
			old := map[string]bool{}
			for _, sc := range subs {
				old[sc.node+"/"+sc.id] = true
			}
			redistest.Eventually(t, 10*time.Second, "the resubscription of every waiter", func() bool {
				return subscribedChannels(pubsubConns(t, c), old) == n
			})
			// Fire them all by moving them to now, shard by shard.
			for _, tm := range batch {
				if _, err := q.FireNow(ctx, tm.ID); err != nil {
					t.Fatal(err)
				}
			}
			claimAll(t, q)
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// List merges the shards by due time with a cursor that never lists a timer
// twice or skips one.
func TestListMergesShards(t *testing.T) {
	redistest.ForEachAll(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		q := newQueue(t, b, queue.Options{})
		base := time.Now().Add(time.Hour).Truncate(time.Millisecond)
		const n = 95
		var batch []queue.NewTimer
		for i := range n {
			batch = append(batch, queue.NewTimer{ID: fmt.Sprintf("l-%03d", i), Due: base.Add(time.Duration(i/3) * time.Millisecond)})
		}
		if _, err := q.ScheduleBatch(ctx, batch); err != nil {
			t.Fatal(err)
		}
		var got []string
		cursor := ""
		for range 20 {
			page, err := q.List(ctx, queue.ListOptions{Limit: 10, Cursor: cursor})
			if err != nil {
				t.Fatal(err)
			}
			for _, tm := range page.Timers {
				got = append(got, tm.ID)
			}
			if cursor = page.NextCursor; cursor == "" {
				break
			}
		}
		if len(got) != n {
			t.Fatalf("listed %d of %d: %v", len(got), n, got)
		}
		for i, id := range got {
			if id != batch[i].ID {
				t.Fatalf("position %d is %s, want %s (due, then ID order)", i, id, batch[i].ID)
			}
		}
	})
}

// On a sharded namespace a consumer reads a shard when its claim announces
// fires, not only on its periodic pass: with Block at 20 s, an event fired
// after the first pass is handled within seconds.
func TestConsumeShardsWakeOnFires(t *testing.T) {
	t.Parallel() // its own namespace on each backend; see docs/development.md, "Loops"
	redistest.ForEachAll(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		ns := redistest.Namespace(t)
		if _, err := queue.CreateNamespace(ctx, b.Client, ns, 4); err != nil {
			t.Fatal(err)
		}
		q, err := queue.New(b.Client, queue.Options{Namespace: ns})
		if err != nil {
			t.Fatal(err)
		}
		defer q.Close()
		var mu sync.Mutex
		got := map[string]bool{}
		consumeAsync(t, q, "g", "c", func(_ context.Context, ev queue.Event) error {
			mu.Lock()
			defer mu.Unlock()
			got[ev.ID] = true
			return nil
		}, queue.ConsumeOptions{Block: 20 * time.Second})
		// The first pass is under way on the last shard once every shard's
		// group exists (it is created just before the shard is read); the
		// next periodic pass is 20 s away.
		redistest.Eventually(t, 10*time.Second, "the first pass over every shard", func() bool {
			for k := range 4 {
				gs, err := b.Client.XInfoGroups(ctx, q.Keys().Stream(k)).Result()
				if err != nil || len(userGroups(gs)) != 1 {
					return false
				}
			}
			return true
		})
		fireN(t, q, "n", 8)
		waitUntil(t, 5*time.Second, "the fired events", func() bool { mu.Lock(); defer mu.Unlock(); return len(got) == 8 })
	})
}
