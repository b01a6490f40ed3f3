package poller_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/redis/go-redis/v9"

	"github.com/timerq/timerq/internal/firerecorder"
	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/poller"
	"github.com/timerq/timerq/queue"
)

func replInfo(c *redis.Client, field string) string {
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

// sentinelSet is a master, a replica and three Sentinels monitoring them
// as "m".
type sentinelSet struct {
	master, replica *redistest.Server
	sentinels       []*redistest.Server
}

func startSentinelSet(t *testing.T) *sentinelSet {
	t.Helper()
	ctx := context.Background()
	s := &sentinelSet{master: redistest.Start(t, redistest.Config{})}
	_, mport, _ := net.SplitHostPort(s.master.Addr())
	s.replica = redistest.Start(t, redistest.Config{Args: []string{"--replicaof", "127.0.0.1", mport}})
	rc := s.replica.Client(t)
	redistest.Eventually(t, 30*time.Second, "the replica to sync", func() bool { return replInfo(rc, "master_link_status") == "up" })
	for range 3 {
		sn := redistest.Start(t, redistest.Config{Sentinel: true})
		sc := sn.Client(t)
		for _, cmd := range [][]any{
			{"SENTINEL", "MONITOR", "m", "127.0.0.1", mport, 2},
			{"SENTINEL", "SET", "m", "down-after-milliseconds", 2000},
			{"SENTINEL", "SET", "m", "failover-timeout", 10000},
		} {
			if err := sc.Do(ctx, cmd...).Err(); err != nil {
				t.Fatalf("%v: %v", cmd, err)
			}
		}
		s.sentinels = append(s.sentinels, sn)
	}
	for _, sn := range s.sentinels {
		sc := sn.Client(t)
		redistest.AwaitPromotableReplicas(t, sc, "m", 1, 30*time.Second)
		redistest.Eventually(t, 30*time.Second, "each Sentinel to see the other two", func() bool {
			others, err := sc.Do(ctx, "SENTINEL", "SENTINELS", "m").Slice()
			return err == nil && len(others) == 2
		})
	}
	return s
}

func (s *sentinelSet) addrs() []string {
	out := make([]string, len(s.sentinels))
	for i, sn := range s.sentinels {
		out[i] = sn.Addr()
	}
	return out
}

// failoverRun is what one run of load through a failover saw.
type failoverRun struct {
	acked  []string
	report firerecorder.Report
}

// upgradeIfAsked moves namespace ns to layout 2 of its keys when the
// tests run with TIMERQ_TEST_LAYOUT=2, as CI's layout-2 arm runs the
// failover tests, so that exactly once through a failover holds on both
// layouts.
func upgradeIfAsked(ctx context.Context, t *testing.T, rdb redis.UniversalClient, ns string) {
	t.Helper()
	if os.Getenv("TIMERQ_TEST_LAYOUT") != "2" {
		return
	}
	q, err := queue.New(rdb, queue.Options{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	for {
		st, err := q.Engine().UpgradeLayout(ctx, queue.MaxBatch)
		if err != nil {
			t.Fatalf("UpgradeLayout: %v", err)
		}
		if st.Done() {
			return
		}
	}
}

// TestSentinelFailoverWithReplicas runs a plain SENTINEL FAILOVER while an
// application schedules (retrying each ID until acknowledged) and a worker
// fires, both through Sentinel, with a Recorder on both nodes. With the
// namespace's replicas setting, no acknowledged schedule is lost and no
// timer is seen fired twice, and none fires early. Without it, plain and
// with docs/security.md's min-replicas-to-write advice, the run only checks
// that none fires early and logs what it saw: losses and duplicates are
// what the setting is for (docs/guarantees.md).
func TestSentinelFailoverWithReplicas(t *testing.T) {
	t.Parallel() // servers of its own; see docs/development.md, "Loops"
	for _, arm := range []struct {
		name     string
		replicas int
		maxLag   int // min-replicas-to-write 1 with this min-replicas-max-lag; 0: off
	}{{"replicas1", 1, 0}, {"plain", 0, 0}, {"plain-min-replicas-lag10", 0, 10}} {
		t.Run(arm.name, func(t *testing.T) {
			t.Parallel() // each arm starts its own servers
			redistest.Require(t)
			run := sentinelFailover(t, arm.replicas, arm.maxLag)
			lost, twice, early := run.report.Missing(run.acked), run.report.Twice(), run.report.Early()
			t.Logf("%s: %d acknowledged, %d lost, %d fired twice, %d early; poll errors %v",
				arm.name, len(run.acked), len(lost), len(twice), len(early), run.report.PollErrors)
			if len(early) > 0 {
				t.Errorf("fired early: %v", early)
			}
			if arm.replicas == 0 {
				// Without the setting the run is a measurement, logged above
				// and quoted by docs/security.md: min-replicas-to-write
				// narrows the window (0 or 1 lost in runs, against ~50) but
				// cannot close it, since writes in flight when the link
				// closes are acknowledged and then discarded.
				return
			}
			if len(lost) > 0 {
				t.Errorf("%d of %d acknowledged schedules never fired: %v", len(lost), len(run.acked), lost)
			}
			if len(twice) > 0 {
				t.Errorf("%d timers seen fired twice: %v", len(twice), twice)
			}
		})
	}
}

func sentinelFailover(t *testing.T, replicas, maxLag int) failoverRun {
	s := startSentinelSet(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if maxLag > 0 {
		// docs/security.md's advice for unplanned failovers, on both nodes
		// (the replica becomes the master).
		for _, n := range []*redistest.Server{s.master, s.replica} {
			for _, kv := range [][2]any{{"min-replicas-to-write", 1}, {"min-replicas-max-lag", maxLag}} {
				if err := n.Client(t).ConfigSet(ctx, kv[0].(string), fmt.Sprint(kv[1])).Err(); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	ns := redistest.Namespace(t)
	mc := s.master.Client(t)
	if replicas > 0 {
		if err := queue.SetReplicas(ctx, mc, ns, replicas, &queue.ReplicasOptions{Force: true}); err != nil {
			t.Fatal(err)
		}
	}
	upgradeIfAsked(ctx, t, mc, ns)
	rec, err := firerecorder.Start(ctx, firerecorder.Options{Nodes: []string{s.master.Addr(), s.replica.Addr()}, Namespace: ns, Shards: 1})
	if err != nil {
		t.Fatal(err)
	}
	newQueue := func() *queue.Queue {
		rdb := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: "m", SentinelAddrs: s.addrs(),
			ContextTimeoutEnabled: true})
		t.Cleanup(func() { rdb.Close() })
		q, err := queue.New(rdb, queue.Options{Namespace: ns, ReplicaTimeout: 500 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { q.Close() })
		return q
	}
	app, wq := newQueue(), newQueue()
	p, err := poller.New(wq, poller.Options{MaxPollInterval: 100 * time.Millisecond, BackoffMax: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	wctx, stopWorker := context.WithCancel(ctx)
	var worker, load sync.WaitGroup
	worker.Go(func() { _ = p.Run(wctx) })
	defer func() { stopWorker(); worker.Wait() }()

	var mu sync.Mutex
	var acked []string
	var ackedN atomic.Int64
	sctx, stopLoad := context.WithCancel(ctx)
	load.Go(func() {
		for i := 0; sctx.Err() == nil; i++ {
			id := fmt.Sprintf("t%06d", i)
			for sctx.Err() == nil {
				c, cancel := context.WithTimeout(sctx, 2*time.Second)
				_, err := app.ScheduleIn(c, id, 300*time.Millisecond, nil)
				cancel()
				if err == nil {
					mu.Lock()
					acked = append(acked, id)
					mu.Unlock()
					ackedN.Add(1)
					break
				}
				if replicas == 0 && errors.Is(err, queue.ErrNotReplicated) {
					t.Errorf("ErrNotReplicated without the setting: %v", err)
				}
				// The application's retry pause, part of the workload.
				time.Sleep(20 * time.Millisecond)
			}
			// A steady rate of about 200 schedules a second.
			time.Sleep(5 * time.Millisecond)
		}
	})
	redistest.Eventually(t, 30*time.Second, "300 schedules", func() bool { return ackedN.Load() >= 300 })

	sc := s.sentinels[0].Client(t)
	if err := sc.Do(ctx, "SENTINEL", "FAILOVER", "m").Err(); err != nil {
		t.Fatal(err)
	}
	redistest.Eventually(t, 30*time.Second, "Sentinel to name the replica master", func() bool {
		addr, err := sc.Do(ctx, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", "m").StringSlice()
		return err == nil && len(addr) == 2 && net.JoinHostPort(addr[0], addr[1]) == s.replica.Addr()
	})
	switched := ackedN.Load()
	// Load goes on until the old master serves as a replica of the new one
	// and 300 more schedules were acknowledged.
	rc := s.replica.Client(t)
	redistest.Eventually(t, 60*time.Second, "the old master to replicate the new one", func() bool {
		return replInfo(mc, "role") == "slave" && replInfo(mc, "master_link_status") == "up" &&
			replInfo(rc, "connected_slaves") == "1"
	})
	redistest.Eventually(t, 60*time.Second, "300 schedules after the switch", func() bool { return ackedN.Load() >= switched+300 })
	stopLoad()
	load.Wait()

	// Every acknowledged timer fires, as far as the recorder saw: wait for
	// the new master to have none left scheduled, then a last poll.
	redistest.Eventually(t, 60*time.Second, "every timer to fire", func() bool {
		st, err := wq.Stats(ctx)
		return err == nil && st.Scheduled == 0
	})
	redistest.Eventually(t, 10*time.Second, "the recorder to read every fired timer", func() bool {
		st, err := wq.Stats(ctx)
		return err == nil && len(rec.Snapshot().Events) >= int(st.Fired)
	})
	mu.Lock()
	defer mu.Unlock()
	return failoverRun{acked: append([]string(nil), acked...), report: rec.Stop()}
}

// TestClusterStaleMasterWithReplicas freezes (SIGSTOP) the master of a
// 16-shard namespace's shard 0 past the node timeout, on a Cluster of 3
// masters and 3 replicas, while an application schedules and two workers
// fire, and resumes it (SIGCONT) once its replica was promoted: for a
// moment the old master runs the claims queued on its sockets before it
// learns it was demoted. A Recorder reads every node's fire streams every
// 20 ms and hears every wakeup. With replicas: 1 no timer is seen fired
// twice, every acknowledged timer fires and none early; without it, the
// run logs what the recorder saw.
func TestClusterStaleMasterWithReplicas(t *testing.T) {
	t.Parallel() // servers of its own; see docs/development.md, "Loops"
	for _, arm := range []struct {
		name     string
		replicas int
	}{{"replicas1", 1}, {"plain", 0}} {
		t.Run(arm.name, func(t *testing.T) {
			t.Parallel() // each arm starts its own servers
			redistest.Require(t)
			run := staleMaster(t, arm.replicas)
			lost, twice, early := run.report.Missing(run.acked), run.report.Twice(), run.report.Early()
			t.Logf("%s: %d acknowledged, %d lost, %d fired twice, %d early", arm.name, len(run.acked), len(lost), len(twice), len(early))
			if len(twice) > 0 {
				t.Logf("first: %v", twice[0])
			}
			if arm.replicas == 0 {
				return
			}
			if len(early) > 0 {
				t.Errorf("fired early: %v", early)
			}
			if len(lost) > 0 {
				t.Errorf("%d of %d acknowledged schedules never fired: %v", len(lost), len(run.acked), lost)
			}
			if len(twice) > 0 {
				t.Errorf("%d timers seen fired twice: %v", len(twice), twice)
			}
		})
	}
}

func staleMaster(t *testing.T, replicas int) failoverRun {
	const shards = 16
	c := redistest.StartClusterOpts(t, redistest.ClusterConfig{Masters: 3, ReplicasPerMaster: 1, NodeTimeout: 2 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ns := redistest.Namespace(t)
	admin := c.Client(t)
	if _, err := queue.CreateNamespace(ctx, admin, ns, shards); err != nil {
		t.Fatal(err)
	}
	if replicas > 0 {
		if err := queue.SetReplicas(ctx, admin, ns, replicas, &queue.ReplicasOptions{Force: true}); err != nil {
			t.Fatal(err)
		}
	}
	upgradeIfAsked(ctx, t, admin, ns)
	rec, err := firerecorder.Start(ctx, firerecorder.Options{Nodes: c.Addrs(), Namespace: ns, Shards: shards})
	if err != nil {
		t.Fatal(err)
	}
	newQueue := func() *queue.Queue {
		// Clients that learn a promotion within about a second, as
		// clients that re-read the slot map on failover errors do: the
		// stale master's claims then race the new master's.
		rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs(), ClusterStateReloadInterval: 500 * time.Millisecond})
		t.Cleanup(func() { rdb.Close() })
		q, err := queue.New(rdb, queue.Options{Namespace: ns, PubSub: queue.PubSubClassic, ReplicaTimeout: 500 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { q.Close() })
		return q
	}
	app := newQueue()
	wctx, stopWorkers := context.WithCancel(ctx)
	var workers, load sync.WaitGroup
	var wqs []*queue.Queue
	for range 2 {
		wq := newQueue()
		wqs = append(wqs, wq)
		p, err := poller.New(wq, poller.Options{MaxPollInterval: 100 * time.Millisecond, BackoffMax: 500 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		workers.Go(func() { _ = p.Run(wctx) })
	}
	defer func() { stopWorkers(); workers.Wait() }()

	var mu sync.Mutex
	var acked []string
	var ackedN atomic.Int64
	sctx, stopLoad := context.WithCancel(ctx)
	for g := range 4 {
		load.Go(func() {
			for i := 0; sctx.Err() == nil; i++ {
				id := fmt.Sprintf("g%d-%06d", g, i)
				for sctx.Err() == nil {
					c, cancel := context.WithTimeout(sctx, 2*time.Second)
					_, err := app.ScheduleIn(c, id, 300*time.Millisecond, nil)
					cancel()
					if err == nil {
						mu.Lock()
						acked = append(acked, id)
						mu.Unlock()
						ackedN.Add(1)
						break
					}
					// The application's retry pause, part of the workload.
					time.Sleep(20 * time.Millisecond)
				}
				// About 50 schedules a second per goroutine.
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
	redistest.Eventually(t, 30*time.Second, "300 schedules", func() bool { return ackedN.Load() >= 300 })

	old := c.Master(t, app.Keys().Shard(0)[0])
	cands := c.ReplicasOf(t, old)
	if len(cands) != 1 {
		t.Fatalf("%s has replicas %v, want one", old.Addr(), cands)
	}
	promoted := cands[0]
	pc := promoted.Client(t)
	c.Stop(old)
	redistest.Eventually(t, 30*time.Second, "the replica to be promoted", func() bool { return replInfo(pc, "role") == "master" })
	at := time.Now()
	c.Cont(old)
	t.Logf("froze %s; %s promoted at %v; resumed", old.Addr(), promoted.Addr(), at.Format("15:04:05.000"))
	oc := old.Client(t)
	redistest.Eventually(t, 60*time.Second, "the old master to replicate the new one", func() bool {
		return replInfo(oc, "role") == "slave" && replInfo(oc, "master_link_status") == "up" &&
			replInfo(pc, "connected_slaves") == "1"
	})
	after := ackedN.Load()
	redistest.Eventually(t, 60*time.Second, "300 schedules after the failover", func() bool { return ackedN.Load() >= after+300 })
	stopLoad()
	load.Wait()

	redistest.Eventually(t, 90*time.Second, "every timer to fire", func() bool {
		st, err := wqs[0].Stats(ctx)
		return err == nil && st.Scheduled == 0
	})
	redistest.Eventually(t, 10*time.Second, "the recorder to read every fired timer", func() bool {
		st, err := wqs[0].Stats(ctx)
		return err == nil && len(rec.Snapshot().Events) >= int(st.Fired)
	})
	mu.Lock()
	defer mu.Unlock()
	return failoverRun{acked: append([]string(nil), acked...), report: rec.Stop()}
}

// TestWorkerWarnsOncePerReplicasChange: a worker of a namespace with
// replicas 1 whose master has one replica (no spare for a failover) warns
// once, however many checks find it so, reports the counts to its
// metrics, says when a second replica brings the spare, and warns again
// when that replica goes.
func TestWorkerWarnsOncePerReplicasChange(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	master := redistest.Start(t, redistest.Config{})
	_, port, _ := net.SplitHostPort(master.Addr())
	first := redistest.Start(t, redistest.Config{Args: []string{"--replicaof", "127.0.0.1", port}})
	mc := master.Client(t)
	online := func(n int) func() bool {
		return func() bool { return strings.Count(mc.Info(ctx, "replication").Val(), "state=online") == n }
	}
	redistest.Eventually(t, 30*time.Second, "the first replica to sync", online(1))
	_ = first
	ns := redistest.Namespace(t)
	if err := queue.SetReplicas(ctx, mc, ns, 1, &queue.ReplicasOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	var logs logBuf
	m := poller.NewMetrics()
	var checks atomic.Int64
	hooks := m.Hooks()
	report := hooks.Replicas
	hooks.Replicas = func(n int, ms []queue.MasterReplicas) { report(n, ms); checks.Add(1) }
	p, err := poller.New(newQueue(t, mc, ns), poller.Options{Logger: logs.logger(), ReplicasCheck: 20 * time.Millisecond, Hooks: hooks})
	if err != nil {
		t.Fatal(err)
	}
	start(t, p)
	const warning = "a master has too few replicas"
	gauge := func(g interface{ Write(*dto.Metric) error }) float64 {
		var d dto.Metric
		_ = g.Write(&d)
		return d.GetGauge().GetValue()
	}
	afterChecks := func(n int64) {
		t.Helper()
		seen := checks.Load()
		redistest.Eventually(t, 10*time.Second, "more checks", func() bool { return checks.Load() >= seen+n })
	}
	afterChecks(10)
	if n := logs.count(warning); n != 1 {
		t.Fatalf("%d warnings over 10 checks of one state, want 1:\n%s", n, logs.String())
	}
	if !strings.Contains(logs.String(), "master "+master.Addr()+" has 1 replica in sync") {
		t.Fatalf("the warning does not name the master and its count:\n%s", logs.String())
	}
	if s, min := gauge(m.ReplicasSetting), gauge(m.MasterReplicasMin); s != 1 || min != 1 {
		t.Fatalf("timerq_replicas_setting %v, timerq_master_replicas_min %v; want 1 and 1", s, min)
	}

	second := redistest.Start(t, redistest.Config{Args: []string{"--replicaof", "127.0.0.1", port}})
	redistest.Eventually(t, 30*time.Second, "the second replica to sync", online(2))
	redistest.Eventually(t, 10*time.Second, "the all-clear", func() bool { return logs.count("has its replicas again") == 1 })
	afterChecks(1)
	if min := gauge(m.MasterReplicasMin); min != 2 {
		t.Fatalf("timerq_master_replicas_min %v with two replicas, want 2", min)
	}
	if err := second.Client(t).Do(ctx, "REPLICAOF", "NO", "ONE").Err(); err != nil {
		t.Fatal(err)
	}
	redistest.Eventually(t, 10*time.Second, "a second warning", func() bool { return logs.count(warning) == 2 })
	afterChecks(10)
	if n := logs.count(warning); n != 2 {
		t.Fatalf("%d warnings, want 2 (one per change):\n%s", n, logs.String())
	}
}
