package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/queue"
)

// TestWorkersOnClusterExactlyOnceThroughKill: on a 3-master Cluster, a
// 16-shard namespace, two timerworkers share the shards; one is SIGKILLed
// midway, and the other picks up its shards once its membership expires.
// Every one of 5,000 timers fires exactly once, none early, and every
// master fires some.
func TestWorkersOnClusterExactlyOnceThroughKill(t *testing.T) {
	t.Parallel() // servers of its own; see docs/development.md, "Loops"
	c := redistest.StartCluster(t, 3, nil)
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
	const n = 5000
	base := time.Now().Add(time.Second)
	batch := make([]queue.NewTimer, n)
	for i := range batch {
		batch[i] = queue.NewTimer{ID: fmt.Sprint("k", i), Due: base.Add(time.Duration(i) * 4 * time.Second / n)}
	}
	if _, err := q.ScheduleBatch(ctx, batch); err != nil {
		t.Fatal(err)
	}
	before := evalCalls(t, c)
	args := []string{"--redis", c.URL(), "--namespace", ns, "--log-level", "info"}
	w1 := startWorker(t, args...)
	w2 := startWorker(t, args...)
	waitFor(t, 10*time.Second, "both workers to claim shards", func() bool {
		return strings.Contains(w1.logText(), "claiming shards") && strings.Contains(w2.logText(), "claiming shards")
	})
	waitFor(t, 10*time.Second, "about half the timers to fire", func() bool {
		st, err := q.Stats(ctx)
		return err == nil && st.Fired >= n/2
	})
	w1.kill()
	waitFor(t, 30*time.Second, "every timer to fire", func() bool {
		st, err := q.Stats(ctx)
		return err == nil && st.Fired == n
	})
	counts := fireCounts(t, rdb, q)
	for _, tm := range batch {
		if counts[tm.ID] != 1 {
			t.Fatalf("%s fired %d times; survivor log:\n%s", tm.ID, counts[tm.ID], w2.logText())
		}
	}
	if len(counts) != n {
		t.Fatalf("%d distinct timers fired, want %d", len(counts), n)
	}
	after := evalCalls(t, c)
	for _, s := range c.Nodes {
		if after[s.Addr()] == before[s.Addr()] {
			t.Errorf("master %s ran no claims", s.Addr())
		}
	}
	// The survivor fires the dead worker's shards by takeover at once; it
	// owns them once the dead one's membership lapses (3 s).
	waitFor(t, 10*time.Second, "the survivor to own every shard", func() bool {
		return strings.Contains(w2.logText(), "[0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15]")
	})
	if code, _ := w2.term(); code != 0 {
		t.Fatalf("survivor exit %d", code)
	}
}

func evalCalls(t *testing.T, c *redistest.Cluster) map[string]int64 {
	t.Helper()
	m := c.CommandCalls(t, "evalsha")
	for _, cmd := range []string{"eval", "fcall"} {
		for addr, n := range c.CommandCalls(t, cmd) {
			m[addr] += n
		}
	}
	return m
}
