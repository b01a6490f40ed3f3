package queue_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/timerq/timerq/internal/keyspace"
	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/queue"
	"github.com/timerq/timerq/scripts/lua"
)

// masterReplica starts a master and a replica of it, synced.
func masterReplica(t *testing.T) (master, replica *redistest.Server) {
	t.Helper()
	master = redistest.Start(t, redistest.Config{})
	_, port, _ := net.SplitHostPort(master.Addr())
	replica = redistest.Start(t, redistest.Config{Args: []string{"--replicaof", "127.0.0.1", port}})
	attach(t, replica, master)
	return master, replica
}

// attach makes replica a replica of master and waits until it is synced
// and master lists it online: the state the replicas check counts, which a
// replica reaches after connected_slaves already counts it.
func attach(t *testing.T, replica, master *redistest.Server) {
	t.Helper()
	host, port, _ := net.SplitHostPort(master.Addr())
	rc, mc := replica.Client(t), master.Client(t)
	if err := rc.Do(context.Background(), "REPLICAOF", host, port).Err(); err != nil {
		t.Fatal(err)
	}
	redistest.Eventually(t, 30*time.Second, "the replica to sync", func() bool {
		return infoField(rc, "master_link_status") == "up" && infoField(mc, "connected_slaves") == "1" &&
			strings.Contains(infoField(mc, "slave0"), "state=online")
	})
}

func infoField(c *redis.Client, field string) string {
	info, err := c.Info(context.Background(), "replication").Result()
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			return v
		}
	}
	return ""
}

// TestReplicasFireOnlyOnceReplicasHaveTheClaim: in a namespace with
// replicas: 1, a claim whose decision no replica acknowledged fires
// nothing (no record marked fired, no stream entry, no wakeup), and
// Schedule says the outcome is unknown; once a replica is back, the next
// claim fires the held timers, once.
func TestReplicasFireOnlyOnceReplicasHaveTheClaim(t *testing.T) {
	master, replica := masterReplica(t)
	ctx := context.Background()
	mc := master.Client(t)
	ns := redistest.Namespace(t)
	if err := queue.SetReplicas(ctx, mc, ns, 1, &queue.ReplicasOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	q, err := queue.New(mc, queue.Options{Namespace: ns, ReplicaTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	past := time.Now().Add(-time.Minute)
	if n, err := q.Inspect().Replicas(ctx); err != nil || n != 1 {
		t.Fatalf("Replicas = %d, %v; want 1", n, err)
	}
	for i := range 5 {
		if _, err := q.Schedule(ctx, fmt.Sprintf("a%d", i), past, []byte("p")); err != nil {
			t.Fatalf("schedule with a replica in sync: %v", err)
		}
	}
	res, err := q.Engine().Claim(ctx, 100)
	if err != nil || len(res.Fired) != 5 {
		t.Fatalf("claim with a replica in sync: %d fired, %v; want 5", len(res.Fired), err)
	}
	sp := keyspace.Shard(ns, 0, 1)
	if n := mc.XLen(ctx, sp.Fires()).Val(); n != 5 {
		t.Fatalf("%d fire stream entries, want 5", n)
	}

	// No replica: Schedule's outcome is unknown, and a claim fires nothing.
	rc := replica.Client(t)
	if err := rc.Do(ctx, "REPLICAOF", "NO", "ONE").Err(); err != nil {
		t.Fatal(err)
	}
	redistest.Eventually(t, 10*time.Second, "the master to lose its replica", func() bool {
		return infoField(mc, "connected_slaves") == "0"
	})
	_, err = q.Schedule(ctx, "b", past, []byte("p"))
	if !errors.Is(err, queue.ErrNotReplicated) || !strings.Contains(err.Error(), "retry with the same IDs") {
		t.Fatalf("schedule without a replica: %v; want ErrNotReplicated saying a retry is safe", err)
	}
	sub := mc.Subscribe(ctx, q.Keys().Timer("b"))
	defer sub.Close()
	if _, err := sub.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	res, err = q.Engine().Claim(ctx, 100)
	if !errors.Is(err, queue.ErrNotReplicated) || len(res.Fired) != 0 {
		t.Fatalf("claim without a replica: %d fired, %v; want none and ErrNotReplicated", len(res.Fired), err)
	}
	if tm, err := q.Get(ctx, "b"); err != nil || tm.State != queue.StateScheduled {
		t.Fatalf("a held timer reads %+v, %v; want scheduled", tm, err)
	}
	wctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	err = q.Wait(wctx, "b")
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait on a held timer: %v; want it still waiting when its context ends", err)
	}
	if n := mc.XLen(ctx, sp.Fires()).Val(); n != 5 {
		t.Fatalf("%d fire stream entries after an unreplicated claim, want 5", n)
	}
	// Another claimer finds the decision held until its lease ends.
	q2, err := queue.New(mc, queue.Options{Namespace: ns, ReplicaTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer q2.Close()
	res2, err := q2.Engine().Claim(ctx, 100)
	if err != nil || len(res2.Fired) != 0 || !res2.NextDue.After(res2.Now) {
		t.Fatalf("a second claimer: %+v, %v; want nothing fired and a NextDue at the lease's end", res2, err)
	}

	// The replica back: this queue's next claim takes its decision over.
	attach(t, replica, master)
	res, err = q.Engine().Claim(ctx, 100)
	if err != nil || len(res.Fired) != 1 || res.Fired[0].ID != "b" {
		t.Fatalf("claim with the replica back: %+v, %v; want b fired", res.Fired, err)
	}
	msg, err := sub.ReceiveMessage(ctx)
	if err != nil || msg.Payload != "fired" {
		t.Fatalf("wakeup: %v, %v", msg, err)
	}
	if tm, err := q.Get(ctx, "b"); err != nil || tm.State != queue.StateFired {
		t.Fatalf("b reads %+v, %v; want fired", tm, err)
	}
	if err := q.Wait(ctx, "b"); err != nil {
		t.Fatalf("Wait on b once fired: %v", err)
	}
	entries := mc.XRange(ctx, sp.Fires(), "-", "+").Val()
	if len(entries) != 6 || entries[5].Values["id"] != "b" {
		t.Fatalf("fire stream: %v; want 6 entries, b last", entries)
	}
	if res, err := q2.Engine().Claim(ctx, 100); err != nil || len(res.Fired) != 0 {
		t.Fatalf("claim after the commit: %+v, %v; want nothing more", res, err)
	}
	if fields := mc.HKeys(ctx, sp.Hold()).Val(); len(fields) != 1 || fields[0] != "top" {
		t.Fatalf("hold hash after the commit: %v, want only top", fields)
	}
}

// TestReplicasCheckPermissionsNamesWait: with the replicas setting, a
// Redis user refused WAIT is told at start-up, by CheckPermissions; the
// same user passes without the setting.
func TestReplicasCheckPermissionsNamesWait(t *testing.T) {
	srv := redistest.Start(t, redistest.Config{})
	admin := srv.Client(t)
	ctx := context.Background()
	ns := redistest.Namespace(t)
	if err := admin.Do(ctx, "ACL", "SETUSER", "nowait", "on", ">pw", "+@all", "-wait",
		"~timerq:{"+ns+"}:*", "&timerq:{"+ns+"}:*").Err(); err != nil {
		t.Fatal(err)
	}
	uc := redis.NewClient(&redis.Options{Addr: srv.Addr(), Username: "nowait", Password: "pw"})
	defer uc.Close()
	check := func() error {
		q, err := queue.New(uc, queue.Options{Namespace: ns})
		if err != nil {
			t.Fatal(err)
		}
		defer q.Close()
		return q.CheckPermissions(ctx)
	}
	if err := check(); err != nil {
		t.Fatalf("without the setting: %v", err)
	}
	if err := queue.SetReplicas(ctx, admin, ns, 1, &queue.ReplicasOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	err := check()
	if !errors.Is(err, queue.ErrPermission) || !strings.Contains(err.Error(), "+wait") {
		t.Fatalf("with the setting: %v; want ErrPermission naming +wait", err)
	}
}

// TestReplicasRecommitIsTheSameFire plays the failover the replicas
// setting is built for: a decision reaches the replica, the commit runs
// on the master (a reader sees the fire there) and is lost with it. The
// promoted replica takes the decision over once its lease ends and commits
// it again: the same fire stream entry ID and fired time, one fire, not a
// second one.
func TestReplicasRecommitIsTheSameFire(t *testing.T) {
	master, replica := masterReplica(t)
	ctx := context.Background()
	mc, rc := master.Client(t), replica.Client(t)
	ns := redistest.Namespace(t)
	if err := queue.SetReplicas(ctx, mc, ns, 1, &queue.ReplicasOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	q, err := queue.New(mc, queue.Options{Namespace: ns, ReplicaTimeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	if _, err := q.Schedule(ctx, "c", time.Now().Add(-time.Minute), []byte("p")); err != nil {
		t.Fatal(err)
	}
	sp := spaceAt(t, mc, q, 0)
	keys := lua.Hold.Keys(sp, "")
	// The decision, on the master, until the replica has it.
	r, err := redis.NewScript(lua.Hold.At(sp.Layout()).Source).Run(ctx, mc, keys, 10, 1200, "tok1", "").StringSlice()
	if err != nil || r[2] != "held" {
		t.Fatalf("hold: %v, %v", r, err)
	}
	redistest.Eventually(t, 10*time.Second, "the replica to have the decision", func() bool {
		return rc.HGet(ctx, sp.Hold(), "token").Val() == "tok1"
	})
	// The replica is promoted; the master, not yet told, commits: a reader
	// of the master sees the fire.
	if err := rc.Do(ctx, "REPLICAOF", "NO", "ONE").Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := redis.NewScript(lua.Commit.At(sp.Layout()).Source).Run(ctx, mc, keys, "tok1", 60000, 1000,
		sp.TimerChannelPrefix()).StringSlice(); err != nil {
		t.Fatal(err)
	}
	seen := mc.XRange(ctx, sp.Fires(), "-", "+").Val()
	if len(seen) != 1 || seen[0].Values["id"] != "c" {
		t.Fatalf("the old master's stream: %v", seen)
	}
	// The old master follows the new one, losing its commit; a worker of
	// the new master takes the decision over once the lease ends.
	attach(t, master, replica)
	q2, err := queue.New(rc, queue.Options{Namespace: ns, ReplicaTimeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer q2.Close()
	if tm, err := q2.Get(ctx, "c"); err != nil || tm.State != queue.StateScheduled {
		t.Fatalf("c on the new master before the takeover: %+v, %v; want scheduled", tm, err)
	}
	redistest.Eventually(t, 10*time.Second, "the new master to commit the decision", func() bool {
		res, err := q2.Engine().Claim(ctx, 10)
		return err == nil && len(res.Fired) == 1
	})
	again := rc.XRange(ctx, sp.Fires(), "-", "+").Val()
	if len(again) != 1 || again[0].ID != seen[0].ID || again[0].Values["fired"] != seen[0].Values["fired"] {
		t.Fatalf("the new master's stream %v; want the old master's entry %v again, same ID and fired time", again, seen)
	}
}

// In a namespace with replicas, a delivering timer's fire event names its
// endpoint as a plain claim's does, and the fire moves the name out of the
// deliver hash (commit.lua).
func TestReplicasDeliveringTimerCarriesEndpoint(t *testing.T) {
	master, _ := masterReplica(t)
	ctx := context.Background()
	mc := master.Client(t)
	ns := redistest.Namespace(t)
	if err := queue.SetReplicas(ctx, mc, ns, 1, &queue.ReplicasOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	q, err := queue.New(mc, queue.Options{Namespace: ns, ReplicaTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	if _, err := q.Endpoints().Put(ctx, billing(), nil); err != nil {
		t.Fatal(err)
	}
	past := time.Now().Add(-time.Minute)
	if _, err := q.ScheduleBatch(ctx, []queue.NewTimer{{ID: "d", Due: past, Endpoint: "billing"}, {ID: "p", Due: past}}); err != nil {
		t.Fatal(err)
	}
	if res, err := q.Engine().Claim(ctx, 100); err != nil || len(res.Fired) != 2 {
		t.Fatalf("claim: %+v, %v", res, err)
	}
	sp := keyspace.Shard(ns, 0, 1)
	entries, err := mc.XRange(ctx, sp.Fires(), "-", "+").Result()
	if err != nil || len(entries) != 2 {
		t.Fatalf("fire stream: %v, %v", entries, err)
	}
	for _, m := range entries {
		want := map[string]string{"d": "billing", "p": ""}[m.Values["id"].(string)]
		if got, _ := m.Values["endpoint"].(string); got != want {
			t.Errorf("fire event of %v: endpoint %q, want %q", m.Values["id"], got, want)
		}
	}
	if n := mc.Exists(ctx, sp.Deliveries()).Val(); n != 0 {
		t.Fatalf("the deliver hash outlived the fire")
	}
}

// TestReplicasDebounce: in a namespace with replicas: 1, Debounce waits
// for the replica like Schedule: with it in sync a window opens, is pushed
// and fires once, through the claim's hold and commit; without it the
// outcome is unknown, and calling again is what to do.
func TestReplicasDebounce(t *testing.T) {
	master, replica := masterReplica(t)
	ctx := context.Background()
	mc := master.Client(t)
	ns := redistest.Namespace(t)
	if err := queue.SetReplicas(ctx, mc, ns, 1, &queue.ReplicasOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	q, err := queue.New(mc, queue.Options{Namespace: ns, ReplicaTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	o := queue.DebounceOptions{Delay: time.Hour, MaxWait: 2 * time.Hour, Payload: []byte("p")}
	first, err := q.Debounce(ctx, "k", o)
	if err != nil || first.Outcome != queue.DebounceCreated {
		t.Fatalf("debounce with a replica in sync: %+v, %v", first, err)
	}
	redistest.AwaitServerTime(t, mc, first.Now.Add(2*time.Millisecond))
	if res, err := q.Debounce(ctx, "k", o); err != nil || res.Outcome != queue.DebouncePushed {
		t.Fatalf("second debounce: %+v, %v", res, err)
	}
	if _, err := q.FireNow(ctx, first.Timer.ID); err != nil {
		t.Fatal(err)
	}
	redistest.Eventually(t, 5*time.Second, "the window to fire", func() bool {
		res, err := q.Engine().Claim(ctx, 10)
		if err != nil {
			t.Fatal(err)
		}
		return len(res.Fired) == 1 && res.Fired[0].ID == first.Timer.ID
	})
	if err := replica.Client(t).Do(ctx, "REPLICAOF", "NO", "ONE").Err(); err != nil {
		t.Fatal(err)
	}
	redistest.Eventually(t, 10*time.Second, "the master to lose its replica", func() bool {
		return infoField(mc, "connected_slaves") == "0"
	})
	_, err = q.Debounce(ctx, "k", o)
	if !errors.Is(err, queue.ErrNotReplicated) || !errors.Is(err, queue.ErrOutcomeUnknown) || !strings.Contains(err.Error(), "debounce again") {
		t.Fatalf("debounce without a replica: %v; want ErrNotReplicated and ErrOutcomeUnknown, saying to call again", err)
	}
}

// A held timer rescheduled within the same millisecond before the commit
// is not the timer held: commit.lua compares the exact due score,
// microseconds included, and skips it (fired at the held time it could be
// early by the new due time).
func TestReplicasCommitSkipsARescheduleWithinTheMillisecond(t *testing.T) {
	q, c := privateQueue(t)
	ctx := context.Background()
	due := time.Now().Add(-time.Minute).Truncate(time.Millisecond).Add(200 * time.Microsecond)
	if _, err := q.Schedule(ctx, "c", due, []byte("p")); err != nil {
		t.Fatal(err)
	}
	sp := spaceAt(t, c, q, 0)
	keys := lua.Hold.Keys(sp, "")
	hold, commitScript := redis.NewScript(lua.Hold.At(sp.Layout()).Source), redis.NewScript(lua.Commit.At(sp.Layout()).Source)
	r, err := hold.Run(ctx, c, keys, 10, 60000, "tok1", "").StringSlice()
	if err != nil || r[2] != "held" {
		t.Fatalf("hold: %v, %v", r, err)
	}
	if held := c.HGet(ctx, sp.Hold(), "i:0").Val(); !strings.HasSuffix(held, ".200:c") {
		t.Fatalf("held %q, want the due score with its microseconds", held)
	}
	if _, err := q.Reschedule(ctx, "c", due.Add(500*time.Microsecond)); err != nil {
		t.Fatal(err)
	}
	commit := func(token string) []string {
		r, err := commitScript.Run(ctx, c, keys, token, 60000, 1000,
			sp.TimerChannelPrefix()).StringSlice()
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	if r := commit("tok1"); len(r) != 3 {
		t.Fatalf("commit fired %v, the timer moved since the hold", r)
	}
	if tm, err := q.Get(ctx, "c"); err != nil || tm.State != queue.StateScheduled || !tm.Due.Equal(due.Add(500*time.Microsecond)) {
		t.Fatalf("c after the commit: %+v, %v; want scheduled at its new due time", tm, err)
	}
	// Held again at its new due score, it fires, due its millisecond.
	r, err = hold.Run(ctx, c, keys, 10, 60000, "tok2", "").StringSlice()
	if err != nil || r[2] != "held" {
		t.Fatalf("hold: %v, %v", r, err)
	}
	if r := commit("tok2"); len(r) < 6 || r[3] != "c" || r[4] != fmt.Sprint(due.UnixMilli()) {
		t.Fatalf("second commit: %v; want c fired, due %d", r, due.UnixMilli())
	}
}

// TestSetReplicasNeedsASpareReplica: SetReplicas(n) refuses, and writes
// nothing, while a master has n replicas or fewer in sync, naming the
// master, its count and the fix; it takes the setting once the master has
// n + 1, or with Force. A server that does not report its replicas
// (miniredis) is refused too, unless forced.
func TestSetReplicasNeedsASpareReplica(t *testing.T) {
	t.Parallel()
	master, _ := masterReplica(t)
	ctx := context.Background()
	mc := master.Client(t)
	ns := redistest.Namespace(t)
	replicas := func() int {
		t.Helper()
		q, err := queue.New(mc, queue.Options{Namespace: ns})
		if err != nil {
			t.Fatal(err)
		}
		defer q.Close()
		n, err := q.Inspect().Replicas(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}

	// One replica: a failover would leave the promoted one with none.
	err := queue.SetReplicas(ctx, mc, ns, 1, nil)
	if !errors.Is(err, queue.ErrTooFewReplicas) {
		t.Fatalf("replicas 1 on a master with 1 replica: %v; want ErrTooFewReplicas", err)
	}
	for _, want := range []string{"master " + master.Addr() + " has 1 replica in sync", "needs 2 replicas", "turn the setting off (0)", "Force"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal %q does not say %q", err, want)
		}
	}
	if n := replicas(); n != 0 {
		t.Fatalf("a refused setting was written: replicas %d", n)
	}
	// CheckReplicas refuses as SetReplicas does, for a namespace not yet
	// created, and writes nothing either way.
	if err := queue.CheckReplicas(ctx, mc, ns, 4, 1, nil); !errors.Is(err, queue.ErrTooFewReplicas) || !strings.Contains(err.Error(), master.Addr()) {
		t.Fatalf("CheckReplicas 1 on a master with 1 replica: %v; want ErrTooFewReplicas naming %s", err, master.Addr())
	}
	if err := queue.CheckReplicas(ctx, mc, ns, 4, 1, &queue.ReplicasOptions{Force: true}); err != nil {
		t.Fatalf("CheckReplicas 1 forced: %v", err)
	}
	if n, err := mc.Exists(ctx, keyspace.Namespace(ns).Meta()).Result(); err != nil || n != 0 {
		t.Fatalf("after SetReplicas and CheckReplicas refused, the meta key exists (%d, %v)", n, err)
	}
	if err := queue.SetReplicas(ctx, mc, ns, 0, nil); err != nil {
		t.Fatalf("replicas 0: %v", err)
	}
	if err := queue.SetReplicas(ctx, mc, ns, 1, &queue.ReplicasOptions{Force: true}); err != nil || replicas() != 1 {
		t.Fatalf("replicas 1 forced: %v; want it set", err)
	}

	// A second replica: 1 has its spare, 2 does not.
	_, port, _ := net.SplitHostPort(master.Addr())
	second := redistest.Start(t, redistest.Config{Args: []string{"--replicaof", "127.0.0.1", port}})
	redistest.Eventually(t, 30*time.Second, "the second replica to sync", func() bool {
		return strings.Count(mc.Info(ctx, "replication").Val(), "state=online") == 2
	})
	_ = second
	q, err := queue.New(mc, queue.Options{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	ms, err := q.Inspect().MasterReplicas(ctx)
	if err != nil || len(ms) != 1 || ms[0].Addr != master.Addr() || ms[0].Replicas != 2 || len(ms[0].Shards) != 1 {
		t.Fatalf("MasterReplicas = %+v, %v; want %s with 2 replicas serving shard 0", ms, err, master.Addr())
	}
	if err := queue.SetReplicas(ctx, mc, ns, 1, nil); err != nil || replicas() != 1 {
		t.Fatalf("replicas 1 on a master with 2 replicas: %v; want it set", err)
	}
	err = queue.SetReplicas(ctx, mc, ns, 2, nil)
	if !errors.Is(err, queue.ErrTooFewReplicas) || !strings.Contains(err.Error(), "at most 1") {
		t.Fatalf("replicas 2 on a master with 2 replicas: %v; want ErrTooFewReplicas suggesting at most 1", err)
	}

	// miniredis reports no replication: refused unless forced.
	_, mini := redistest.Mini(t)
	err = queue.SetReplicas(ctx, mini, ns, 1, nil)
	if !errors.Is(err, queue.ErrReplicasUnread) || !strings.Contains(err.Error(), "INFO replication") || !strings.Contains(err.Error(), "Force") {
		t.Fatalf("replicas 1 on miniredis: %v; want ErrReplicasUnread naming INFO replication and Force", err)
	}
	if err := queue.SetReplicas(ctx, mini, ns, 1, &queue.ReplicasOptions{Force: true}); err != nil {
		t.Fatalf("replicas 1 forced on miniredis: %v", err)
	}
}

// TestReplicasHoldSeesADecisionWhoseTimersAreGone: a held decision stays
// held when every timer it holds was cancelled, so the due set is empty:
// another claimer is told busy until the lease ends, not none (the hold's
// early answer is only for a shard with no decision held).
func TestReplicasHoldSeesADecisionWhoseTimersAreGone(t *testing.T) {
	q, c := privateQueue(t)
	ctx := context.Background()
	if _, err := q.Schedule(ctx, "c", time.Now().Add(-time.Minute), []byte("p")); err != nil {
		t.Fatal(err)
	}
	sp := spaceAt(t, c, q, 0)
	keys := lua.Hold.Keys(sp, "")
	hold := redis.NewScript(lua.Hold.At(sp.Layout()).Source)
	if r, err := hold.Run(ctx, c, keys, 10, 60000, "tok1", "").StringSlice(); err != nil || r[2] != "held" {
		t.Fatalf("hold: %v, %v", r, err)
	}
	if _, err := q.Cancel(ctx, "c"); err != nil {
		t.Fatal(err)
	}
	r, err := hold.Run(ctx, c, keys, 10, 60000, "tok2", "").StringSlice()
	if err != nil || r[2] != "busy" {
		t.Fatalf("a second hold while tok1's decision is held, its timer cancelled: %v, %v; want busy", r, err)
	}
}

// privateQueue starts a redis-server of the test's own, and returns a
// queue of a namespace of the test's on it, with its client.
func privateQueue(t *testing.T) (*queue.Queue, *redis.Client) {
	t.Helper()
	c := redistest.Start(t, redistest.Config{}).Client(t)
	ns := redistest.Namespace(t)
	q, err := queue.New(c, queue.Options{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Close() })
	return q, c
}
