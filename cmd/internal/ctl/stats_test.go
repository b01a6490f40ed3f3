package ctl_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/queue"
)

// TestStatsSaysWhoServesTheNamespace: stats prints how many workers serve
// the namespace and when one was last seen, and warns when timers are due
// with none serving, which is otherwise an unexplained red "overdue".
func TestStatsSaysWhoServesTheNamespace(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		c := newCLI(t, b)
		ctx := context.Background()
		c.ok("schedule", "late", "--at", time.Now().Add(-time.Hour).UTC().Format(time.RFC3339))

		r := c.ok("stats")
		if !strings.Contains(squeeze(r.stdout), "\nworkers 0 serving this namespace (never seen)") {
			t.Errorf("stats does not say no worker ever served it:\n%s", r.stdout)
		}
		if !strings.Contains(r.stderr, "warning: 1 timers are due and no worker serves namespace "+c.ns+" (last seen never)") {
			t.Errorf("no warning for due timers without a worker: stderr %q", r.stderr)
		}

		if _, err := c.q.Engine().Heartbeat(ctx, "w-7", time.Minute, false); err != nil {
			t.Fatal(err)
		}
		r = c.ok("stats")
		if !strings.Contains(squeeze(r.stdout), "\nworkers 1 serving this namespace (last seen now)") || r.stderr != "" {
			t.Errorf("with a live worker: stdout\n%s\nstderr %q", r.stdout, r.stderr)
		}
		var js struct {
			Workers struct {
				Serving    int      `json:"serving"`
				Live       []string `json:"live"`
				LastWorker string   `json:"last_worker"`
			} `json:"workers"`
		}
		if err := json.Unmarshal([]byte(c.ok("-o", "json", "stats").stdout), &js); err != nil {
			t.Fatal(err)
		}
		if js.Workers.Serving != 1 || len(js.Workers.Live) != 1 || js.Workers.Live[0] != "w-7" || js.Workers.LastWorker != "w-7" {
			t.Errorf("json workers = %+v", js.Workers)
		}

		if _, err := c.q.Engine().Heartbeat(ctx, "w-7", time.Minute, true); err != nil {
			t.Fatal(err)
		}
		r = c.ok("stats")
		if !strings.Contains(r.stdout, "0 serving this namespace (last seen now: w-7 stopped)") ||
			!strings.Contains(r.stderr, "no worker serves namespace") {
			t.Errorf("after the worker stopped: stdout\n%s\nstderr %q", r.stdout, r.stderr)
		}
	})
}

// TestEmptyNamespaceWarns: a namespace that holds nothing at all (a typo
// of -n) warns on stderr, for list and stats, and still exits 0; a real
// namespace that is merely empty does not.
func TestEmptyNamespaceWarns(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		c := newCLI(t, b)
		want := "timerctl: warning: namespace " + c.ns + " holds nothing; check -n/TIMERQ_NAMESPACE\n"
		for _, args := range [][]string{{"list"}, {"stats"}, {"-o", "json", "list"}} {
			if r := c.ok(args...); r.stderr != want {
				t.Errorf("timerctl %v: stderr %q, want %q", args, r.stderr, want)
			}
		}
		// A list filtered to nothing in a namespace that has timers is fine.
		c.ok("schedule", "a", "--in", "1h")
		if r := c.ok("list", "--state", "fired"); r.stderr != "" {
			t.Errorf("filtered empty list warns: %q", r.stderr)
		}
		// So is a created namespace without timers.
		other := newCLI(t, b)
		if _, err := queue.CreateNamespace(context.Background(), b.Client, other.ns, 1); err != nil {
			t.Fatal(err)
		}
		if r := other.ok("list"); r.stderr != "" {
			t.Errorf("created namespace warns: %q", r.stderr)
		}
	})
}

// TestStatsShowsTheShardsThatAnswer: with one shard failing (its due key
// the wrong type; in a Cluster, a slot move), stats prints the other
// shards' figures, marks the failed one, and exits non-zero.
func TestStatsShowsTheShardsThatAnswer(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		c := newCLI(t, b)
		ctx := context.Background()
		if _, err := queue.CreateNamespace(ctx, b.Client, c.ns, 4); err != nil {
			t.Fatal(err)
		}
		q, err := queue.New(b.Client, queue.Options{Namespace: c.ns})
		if err != nil {
			t.Fatal(err)
		}
		defer q.Close()
		n := 0
		for i := 0; n < 3; i++ {
			id := "t" + string(rune('a'+i))
			if k, _ := q.Inspect().ShardOf(ctx, id); k == 2 {
				continue
			}
			c.ok("schedule", id, "--in", "1h")
			n++
		}
		if err := b.Client.Set(ctx, q.Keys().Shard(2)[0], "x", 0).Err(); err != nil {
			t.Fatal(err)
		}
		r := c.run("stats")
		if r.code != 1 {
			t.Errorf("exit %d, want 1", r.code)
		}
		if !strings.Contains(squeeze(r.stdout), "\nscheduled 3\n") || !strings.Contains(squeeze(r.stdout), "\nshard 2 FAILED, left out of these figures: shard 2: a namespace key holds the wrong type") {
			t.Errorf("stdout:\n%s", r.stdout)
		}
		if !strings.Contains(r.stderr, "timerctl: stats could not read shard 2: ") || !strings.Contains(r.stderr, "the figures above are the other shards'") {
			t.Errorf("stderr %q", r.stderr)
		}
		r = c.run("-o", "json", "stats")
		var js struct {
			Scheduled int64
			Shards    []struct {
				Shard int
				Error string
			}
		}
		if err := json.Unmarshal([]byte(r.stdout), &js); err != nil || r.code != 1 {
			t.Fatalf("json: exit %d, %v\n%s", r.code, err, r.stdout)
		}
		if js.Scheduled != 3 || len(js.Shards) != 4 || js.Shards[2].Error == "" || js.Shards[1].Error != "" {
			t.Errorf("json: %+v", js)
		}
	})
}

// squeeze turns each run of spaces into one, so that a test does not
// depend on a table's column widths.
func squeeze(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = strings.Join(strings.Fields(l), " ")
	}
	return "\n" + strings.Join(lines, "\n")
}
