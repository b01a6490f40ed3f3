package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/timerq/timerq/internal/keyspace"
	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/queue"
)

// TestWorkersOnClusterFireAScheduleOnEachShard: on a 3-master Cluster, a
// 16-shard namespace with one recurring schedule on each shard (so on
// every master), two timerworkers; one is SIGKILLed midway and the other
// takes its shards, with their schedules. Every occurrence fires exactly
// once, from its schedule's shard, none early, in an unbroken series
// (catch-up "all" fires what the handover delayed), and the next ones stay
// armed.
func TestWorkersOnClusterFireAScheduleOnEachShard(t *testing.T) {
	t.Parallel() // servers of its own; see docs/development.md, "Loops"
	const shards, every = 16, 500 * time.Millisecond
	c := redistest.StartCluster(t, 3, nil)
	rdb := c.Client(t)
	ctx := context.Background()
	ns := redistest.Namespace(t)
	if _, err := queue.CreateNamespace(ctx, rdb, ns, shards); err != nil {
		t.Fatal(err)
	}
	q, err := queue.New(rdb, queue.Options{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	args := []string{"--redis", c.URL(), "--namespace", ns, "--log-level", "info"}
	w1 := startWorker(t, args...)
	w2 := startWorker(t, args...)
	waitFor(t, 10*time.Second, "both workers to claim shards", func() bool {
		return strings.Contains(w1.logText(), "claiming shards") && strings.Contains(w2.logText(), "claiming shards")
	})

	ids := make([]string, shards) // ids[k] lives in shard k
	for i, left := 0, shards; left > 0; i++ {
		if id := fmt.Sprint("each", i); ids[keyspace.ScheduleShard(id, shards)] == "" {
			ids[keyspace.ScheduleShard(id, shards)] = id
			left--
		}
	}
	infos := make([]queue.RecurringInfo, shards)
	masters := map[string]bool{}
	for k, id := range ids {
		if infos[k], _, err = q.Recurring().Put(ctx, queue.Recurring{ID: id, Every: every, CatchUp: queue.CatchUpAll, CatchUpLimit: 100}); err != nil {
			t.Fatal(err)
		}
		masters[c.ServerFor(t, q.Keys().Recurring(k)[0]).Addr()] = true
	}
	if len(masters) != 3 {
		t.Fatalf("the schedules live on %d masters, want all 3", len(masters))
	}

	// perShard counts each shard's fire stream on its own.
	perShard := func() []map[string]int {
		out := make([]map[string]int, shards)
		for k := range out {
			out[k] = map[string]int{}
			countStream(t, rdb, q.Keys().Stream(k), out[k])
		}
		return out
	}
	// series is how many occurrences of schedule k fired in an unbroken
	// series from the first, each once and from shard k.
	series := func(counts []map[string]int, k int) int {
		n := 0
		for j := 1; ; j++ {
			id := queue.OccurrenceID(ids[k], infos[k].Anchor.Add(time.Duration(j)*every))
			if counts[k][id] != 1 {
				return n
			}
			n++
		}
	}
	atLeast := func(n int) func() bool {
		return func() bool {
			counts := perShard()
			for k := range ids {
				if series(counts, k) < n {
					return false
				}
			}
			return true
		}
	}
	waitFor(t, 20*time.Second, "3 occurrences of every schedule", atLeast(3))
	w1.kill()
	waitFor(t, 40*time.Second, "12 occurrences of every schedule after the kill", atLeast(12))
	for _, id := range ids {
		info, err := q.Recurring().Get(ctx, id)
		if err != nil || info.State != queue.RecurringActive || len(info.Pending) == 0 {
			t.Fatalf("%s: %+v, %v; want active with the next occurrences armed", id, info, err)
		}
		if _, err := q.Recurring().Pause(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	if code, _ := w2.term(); code != 0 {
		t.Fatalf("survivor exit %d; log:\n%s", code, w2.logText())
	}

	counts := perShard() // fails on any early fire
	for k, id := range ids {
		n := series(counts, k)
		if n != len(counts[k]) {
			t.Fatalf("shard %d: %d occurrences of %s in series but %d fire entries (%v): a gap, a duplicate or a stray",
				k, n, id, len(counts[k]), counts[k])
		}
	}
	if !strings.Contains(w2.logText(), "[0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15]") {
		t.Errorf("the survivor never took every shard:\n%s", w2.logText())
	}
}
