package cliconf_test

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/timerq/timerq/cmd/internal/cliconf"
	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/poller"
	"github.com/timerq/timerq/queue"
)

// replOffset reads an INFO replication field.
func replField(t *testing.T, c *redis.Client, field string) string {
	t.Helper()
	info, err := c.Info(context.Background(), "replication").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			return v
		}
	}
	return ""
}

func waitUntil(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	redistest.Eventually(t, d, what, cond)
}

// TestPlannedFailoverProcedureLosesNothing runs docs/security.md's planned
// failover on a real master, replica and Sentinel while an application
// schedules and a worker fires through a Sentinel URL: CLIENT PAUSE WRITE
// on the master, wait for the replica's offset, SENTINEL FAILOVER. Every
// acknowledged schedule survives and every timer fires exactly once.
func TestPlannedFailoverProcedureLosesNothing(t *testing.T) {
	master := redistest.Start(t, redistest.Config{})
	_, mport, _ := net.SplitHostPort(master.Addr())
	replica := redistest.Start(t, redistest.Config{Args: []string{"--replicaof", "127.0.0.1", mport}})
	sentinel := redistest.Start(t, redistest.Config{Sentinel: true})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	sc := sentinel.Client(t)
	for _, cmd := range [][]any{
		{"SENTINEL", "MONITOR", "m", "127.0.0.1", mport, 1},
		{"SENTINEL", "SET", "m", "down-after-milliseconds", 2000},
		{"SENTINEL", "SET", "m", "failover-timeout", 10000},
	} {
		if err := sc.Do(ctx, cmd...).Err(); err != nil {
			t.Fatalf("%v: %v", cmd, err)
		}
	}
	mc, rc := master.Client(t), replica.Client(t)
	waitUntil(t, 30*time.Second, "the replica to sync", func() bool { return replField(t, rc, "master_link_status") == "up" })
	redistest.AwaitPromotableReplicas(t, sc, "m", 1, 30*time.Second)

	// The application and the worker, both through the Sentinel URL.
	conn := cliconf.Conn{RedisURL: "redis://" + sentinel.Addr() + "/0?master_name=m"}
	opts, err := conn.Options()
	if err != nil {
		t.Fatal(err)
	}
	opts.ContextTimeoutEnabled = true
	rdb := redis.NewUniversalClient(opts)
	defer rdb.Close()
	ns := redistest.Namespace(t)
	q, err := queue.New(rdb, queue.Options{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	p, err := poller.New(q, poller.Options{MaxPollInterval: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	wctx, stopWorker := context.WithCancel(ctx)
	var worker, wg sync.WaitGroup
	worker.Go(func() { _ = p.Run(wctx) })

	// Schedule continuously; a failed schedule is retried with the same
	// ID (idempotent) until acknowledged.
	var acked atomic.Int64
	sctx, stopSchedule := context.WithCancel(ctx)
	wg.Go(func() {
		for i := 0; sctx.Err() == nil; i++ {
			id := fmt.Sprintf("t%06d", i)
			for sctx.Err() == nil {
				c, cancel := context.WithTimeout(sctx, 2*time.Second)
				_, err := q.Schedule(c, id, time.Now().Add(200*time.Millisecond), nil)
				cancel()
				if err == nil {
					acked.Store(int64(i + 1))
					break
				}
				// The application's retry pause, part of the workload
				// (a client retrying without one floods the failover),
				// not a wait for an event.
				time.Sleep(20 * time.Millisecond)
			}
		}
	})
	waitUntil(t, 30*time.Second, "100 schedules", func() bool { return acked.Load() >= 100 })

	// The procedure.
	if err := mc.Do(ctx, "CLIENT", "PAUSE", 30000, "WRITE").Err(); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 10*time.Second, "the replica to reach the master's offset", func() bool {
		return replField(t, mc, "master_repl_offset") == replField(t, rc, "slave_repl_offset")
	})
	if err := sc.Do(ctx, "SENTINEL", "FAILOVER", "m").Err(); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 30*time.Second, "Sentinel to name the replica master", func() bool {
		addr, err := sc.Do(ctx, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", "m").StringSlice()
		return err == nil && len(addr) == 2 && net.JoinHostPort(addr[0], addr[1]) == replica.Addr()
	})
	// Writes paused on the old master would be acknowledged there if it
	// were unpaused while still a master, and then discarded: unpause only
	// once Sentinel has made it a replica (they then fail with READONLY,
	// and the application retries them on the new master).
	// Sentinel does it at its next look at the old master, which can take
	// many seconds of paused writes; do it now.
	host, port, _ := net.SplitHostPort(replica.Addr())
	if err := mc.Do(ctx, "REPLICAOF", host, port).Err(); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 30*time.Second, "the old master to be a replica", func() bool { return replField(t, mc, "role") == "slave" })
	_ = mc.Do(ctx, "CLIENT", "UNPAUSE").Err()
	before := acked.Load()
	waitUntil(t, 30*time.Second, "100 schedules on the new master", func() bool { return acked.Load() >= before+100 })
	stopSchedule()
	wg.Wait()
	n := int(acked.Load())

	// Every acknowledged timer fires, once.
	waitUntil(t, 30*time.Second, "every timer to fire", func() bool {
		s, err := q.Stats(ctx)
		return err == nil && s.Scheduled == 0
	})
	stopWorker()
	worker.Wait()
	fires := map[string]int{}
	msgs, err := rc.XRange(ctx, q.Keys().Stream(0), "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range msgs {
		id, _ := m.Values["id"].(string)
		fires[id]++
	}
	var lost, twice []string
	for i := range n {
		id := "t" + fmt.Sprintf("%06d", i)
		if _, err := q.Get(ctx, id); err != nil {
			lost = append(lost, id)
		}
		if fires[id] > 1 {
			twice = append(twice, id+"×"+strconv.Itoa(fires[id]))
		}
	}
	if len(lost) > 0 || len(twice) > 0 {
		t.Fatalf("across the planned failover: %d of %d acknowledged schedules lost %v, %d fired more than once %v",
			len(lost), n, lost, len(twice), twice)
	}
	if len(fires) < n {
		t.Fatalf("%d of %d timers fired", len(fires), n)
	}
	t.Logf("%d schedules, %d fires, no loss, no duplicate", n, len(msgs))
}
