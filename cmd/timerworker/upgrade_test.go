package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/timerq/timerq/internal/firerecorder"
	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/queue"
)

// upgradeFrom is the timerq that TestRollingUpgradeSideBySide upgrades
// from: the last main that landed, which is what a deployment runs today.
// Move it forward when a main lands; before a change of layout
// (docs/layout-v2.md), point it at the commit before that change, so the
// test runs the old layout's binaries beside the new one.
const upgradeFrom = "52565e247f5422401b13c249bbab72ce87971437"

// buildAt builds timerworker and timerctl as they were at commit, from
// this clone's history, into a temporary directory.
func buildAt(t *testing.T, commit string) (worker, ctl string) {
	t.Helper()
	if testing.Short() {
		t.Skip("-short builds no binaries; drop -short to run this test")
	}
	if out, err := exec.Command("git", "cat-file", "-e", commit+"^{commit}").CombinedOutput(); err != nil {
		t.Fatalf("this clone lacks commit %s, the timerq a rolling upgrade starts from (%v: %s): "+
			"run the tests in a clone with its history (git fetch --unshallow)", commit, err, strings.TrimSpace(string(out)))
	}
	root, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Fatalf("git rev-parse --show-toplevel: %v", err)
	}
	src, out := t.TempDir(), t.TempDir()
	archive := filepath.Join(out, "src.tar")
	for _, c := range [][]string{
		// From the top: in a subdirectory, git archive takes only that.
		{"git", "-C", strings.TrimSpace(string(root)), "archive", "--format=tar", "-o", archive, commit},
		{"tar", "-xf", archive, "-C", src},
	} {
		if b, err := exec.Command(c[0], c[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(c, " "), err, b)
		}
	}
	// -trimpath keeps the temporary directory out of the build cache's
	// keys, so a second run (CI's flaky-test guard) only links.
	build := exec.Command("go", "build", "-trimpath", "-o", out+string(os.PathSeparator), "./cmd/timerworker", "./cmd/timerctl")
	build.Dir = src
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building timerq at %s: %v\n%s", commit, err, b)
	}
	return filepath.Join(out, "timerworker"), filepath.Join(out, "timerctl")
}

// TestRollingUpgradeSideBySide upgrades a namespace's workers from
// upgradeFrom to this build one at a time, as a deployment does, while
// this build's client and the old timerctl schedule timers: for a while
// old and new workers claim the same namespace's shards side by side,
// each firing timers the other build scheduled, and an old worker dies by
// SIGKILL mid-flight. A live fire recorder (every fire any client could
// read, every 20 ms) must see every acknowledged timer fire exactly once,
// never early, and the counters that both builds write must add up. Midway,
// with an old worker still running, the namespace moves to layout 2 of its
// keys: the old timerctl is then refused, naming the fix, and writes
// nothing, and the old worker fires nothing more. It runs on a standalone
// server and on a 3-master Cluster, 16 shards each.
func TestRollingUpgradeSideBySide(t *testing.T) {
	t.Parallel()
	oldWorker, oldCtl := buildAt(t, upgradeFrom)
	t.Run("standalone", func(t *testing.T) {
		t.Parallel()
		srv := redistest.Start(t, redistest.Config{})
		rollingUpgrade(t, oldWorker, oldCtl, srv.URL(), srv.Client(t), []string{srv.Addr()}, 16)
	})
	t.Run("cluster", func(t *testing.T) {
		t.Parallel()
		c := redistest.StartCluster(t, 3, nil)
		rollingUpgrade(t, oldWorker, oldCtl, c.URL(), c.Client(t), c.Addrs(), 16)
	})
}

// rollingUpgrade is TestRollingUpgradeSideBySide on one Redis: url and rdb
// reach it, nodes are every node a client could read (for the recorder).
func rollingUpgrade(t *testing.T, oldWorker, oldCtl, url string, rdb redis.UniversalClient, nodes []string, shards int) {
	ns := redistest.Namespace(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if _, err := queue.CreateNamespace(ctx, rdb, ns, shards); err != nil {
		t.Fatal(err)
	}
	q, err := queue.New(rdb, queue.Options{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	rec, err := firerecorder.Start(ctx, firerecorder.Options{Nodes: nodes, Namespace: ns, Shards: shards})
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"--redis", url, "--namespace", ns}
	old := []*proc{startProc(t, oldWorker, args...), startProc(t, oldWorker, args...)}

	var mu sync.Mutex
	var acked, refused []string
	ack := func(ids ...string) {
		mu.Lock()
		acked = append(acked, ids...)
		mu.Unlock()
	}
	pctx, stopProducers := context.WithCancel(ctx)
	var producers sync.WaitGroup
	// This build's client: a batch of 5 every 10 ms, due 50-450 ms ahead.
	producers.Go(func() {
		for i := 0; pctx.Err() == nil; i++ {
			batch := make([]queue.NewTimer, 5)
			ids := make([]string, len(batch))
			for j := range batch {
				ids[j] = fmt.Sprintf("new-%05d-%d", i, j)
				batch[j] = queue.NewTimer{ID: ids[j], Due: time.Now().Add(time.Duration(50+80*j) * time.Millisecond), Payload: []byte("p")}
			}
			if _, err := q.ScheduleBatch(ctx, batch); err != nil {
				t.Errorf("schedule: %v", err)
				return
			}
			ack(ids...)
			time.Sleep(10 * time.Millisecond) // the workload's pace, not a wait for an event
		}
	})
	// The old build's timerctl, one timer a call, until the namespace is
	// upgraded to layout 2: then it must be refused, naming the fix.
	producers.Go(func() {
		for i := 0; pctx.Err() == nil; i++ {
			id := fmt.Sprintf("old-%04d", i)
			out, err := exec.Command(oldCtl, append(args, "schedule", id, "--in", "200ms", "--payload", "p")...).CombinedOutput()
			switch {
			case err == nil:
				ack(id)
			case strings.Contains(string(out), "layout 2") && strings.Contains(string(out), "upgrade it"):
				mu.Lock()
				refused = append(refused, id)
				mu.Unlock()
				time.Sleep(20 * time.Millisecond) // the workload's pace
			default:
				t.Errorf("old timerctl schedule %s: %v\n%s", id, err, out)
				return
			}
		}
	})

	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(acked)
	}
	waitFor(t, 20*time.Second, "500 timers scheduled with old workers only", func() bool { return count() >= 500 })
	var upgraded []*proc
	for range 2 {
		upgraded = append(upgraded, startProc(t, binary(t), args...))
	}
	for _, w := range append(upgraded, old...) {
		waitFor(t, 10*time.Second, "the workers to start", func() bool { return strings.Contains(w.logText(), "worker started") })
	}
	// Side by side: the new workers own some shards, the old ones the
	// rest (each shard goes to one of the four by hashing, so with 16
	// shards the new two own none with a chance of 2^-16).
	owning := regexp.MustCompile(`claiming shards".*shards="?\[[0-9]`)
	waitFor(t, 20*time.Second, "a new worker to own shards beside the old ones", func() bool {
		return owning.MatchString(upgraded[0].logText()) || owning.MatchString(upgraded[1].logText())
	})
	at := count()
	waitFor(t, 20*time.Second, "500 more timers with both builds' workers", func() bool { return count() >= at+500 })
	if code, took := old[0].term(); code != 0 {
		t.Errorf("old worker: exit %d after %v on SIGTERM, want 0; log:\n%s", code, took, old[0].logText())
	}
	at = count()
	waitFor(t, 20*time.Second, "500 more timers", func() bool { return count() >= at+500 })
	// Layout 2, shard by shard, a few settled timers a step, while both
	// builds' clients schedule and both builds' workers claim.
	for steps := 0; ; steps++ {
		st, err := q.Engine().UpgradeLayout(ctx, 50)
		if err != nil {
			t.Fatalf("UpgradeLayout: %v", err)
		}
		if st.Done() {
			t.Logf("upgraded %d shards to layout 2 in %d steps", st.Shards, steps+1)
			break
		}
	}
	waitFor(t, 20*time.Second, "the old timerctl to be refused on layout 2", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(refused) > 0
	})
	at = count()
	waitFor(t, 20*time.Second, "500 more timers on layout 2", func() bool { return count() >= at+500 })
	old[1].kill()
	at = count()
	waitFor(t, 20*time.Second, "500 more timers with new workers only", func() bool { return count() >= at+500 })
	stopProducers()
	producers.Wait()

	waitFor(t, 30*time.Second, "every timer to fire", func() bool {
		s, err := q.Stats(ctx)
		return err == nil && s.Scheduled == 0
	})
	// The recorder polls every 20 ms: give it a few rounds past the last fire.
	time.Sleep(100 * time.Millisecond)
	rep := rec.Stop()
	for _, w := range upgraded {
		if code, took := w.term(); code != 0 {
			t.Errorf("new worker: exit %d after %v on SIGTERM, want 0; log:\n%s", code, took, w.logText())
		}
	}
	mu.Lock()
	defer mu.Unlock()
	t.Logf("%d timers (%d by the old timerctl), %d fired as the recorder saw them", len(acked), countPrefix(acked, "old-"), len(rep.Events))
	if m := rep.Missing(acked); len(m) > 0 {
		t.Errorf("%d acknowledged timers never fired, e.g. %v", len(m), m[:min(5, len(m))])
	}
	if d := rep.Twice(); len(d) > 0 {
		t.Errorf("%d timers fired twice, e.g. %v", len(d), d[:min(5, len(d))])
	}
	if e := rep.Early(); len(e) > 0 {
		t.Errorf("%d timers fired early, e.g. %v", len(e), e[:min(5, len(e))])
	}
	c, err := q.Inspect().Counters(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if c.Fired != int64(len(acked)) {
		t.Errorf("the counters say %d fired, want %d: the two builds' counter writes do not add up", c.Fired, len(acked))
	}
	t.Logf("%d schedules by the old timerctl refused on layout 2", len(refused))
	for _, id := range refused {
		if tm, err := q.Get(ctx, id); !errors.Is(err, queue.ErrNotFound) {
			t.Errorf("the old timerctl's refused %s: Get = %+v, %v; want nothing written", id, tm, err)
		}
	}
}

func countPrefix(ids []string, prefix string) int {
	n := 0
	for _, id := range ids {
		if strings.HasPrefix(id, prefix) {
			n++
		}
	}
	return n
}
