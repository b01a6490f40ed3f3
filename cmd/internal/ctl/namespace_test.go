package ctl_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/timerq/timerq/cmd/internal/ctl"
	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/queue"
)

func TestNamespaceCreateAndPerShardStats(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		c := newCLI(t, b)
		type ns struct {
			Namespace string `json:"namespace"`
			Shards    int    `json:"shards"`
			Replicas  int    `json:"replicas"`
			Created   bool   `json:"created"`
		}
		if got := decode[ns](t, c.ok("-o", "json", "namespace", "create", c.ns, "--shards", "4").stdout); !got.Created || got.Shards != 4 {
			t.Fatalf("create = %+v", got)
		}
		if out := c.ok("namespace", "create", c.ns, "--shards", "4").stdout; !strings.Contains(out, "already has 4 shards") {
			t.Fatalf("second create: %q", out)
		}
		r := c.run("namespace", "create", c.ns, "--shards", "8")
		if r.code != ctl.ExitConflict || !strings.Contains(r.stderr, "4 shards") {
			t.Fatalf("changing S: exit %d %q, want %d naming the current count", r.code, r.stderr, ctl.ExitConflict)
		}
		if r := c.run("namespace", "create", c.ns, "--shards", "0"); r.code != ctl.ExitUsage {
			t.Fatalf("--shards 0: exit %d %q", r.code, r.stderr)
		}
		if got := decode[ns](t, c.ok("-o", "json", "namespace", "show").stdout); got.Shards != 4 || got.Replicas != 0 {
			t.Fatalf("show = %+v", got)
		}
		// The replicas setting, set on an existing namespace, is shown to
		// a new client.
		if out := c.ok("namespace", "create", c.ns, "--shards", "4", "--replicas", "1").stdout; !strings.Contains(out, "replicas set to 1") {
			t.Fatalf("create --replicas: %q", out)
		}
		if out := c.ok("namespace", "show").stdout; !strings.Contains(out, "waits for 1 replica") {
			t.Fatalf("show after --replicas 1: %q", out)
		}
		c.ok("namespace", "create", c.ns, "--shards", "4", "--replicas", "0")
		if got := decode[ns](t, c.ok("-o", "json", "namespace", "show").stdout); got.Replicas != 0 {
			t.Fatalf("show after --replicas 0 = %+v", got)
		}
		for i := range 40 {
			c.ok("schedule", fmt.Sprint("t-", i), "--in", "1h")
		}
		type stats struct {
			Scheduled int64 `json:"scheduled"`
			Shards    []struct {
				Shard     int   `json:"shard"`
				Scheduled int64 `json:"scheduled"`
			} `json:"shards"`
		}
		out := c.ok("-o", "json", "stats").stdout
		var st stats
		if err := json.Unmarshal([]byte(out), &st); err != nil {
			t.Fatal(err)
		}
		sum := int64(0)
		for k, s := range st.Shards {
			if s.Shard != k || s.Scheduled == 0 {
				t.Errorf("shard entry %d = %+v", k, s)
			}
			sum += s.Scheduled
		}
		if len(st.Shards) != 4 || sum != 40 || st.Scheduled != 40 {
			t.Fatalf("stats = %s", out)
		}
		if n, err := c.q.Inspect().Shards(context.Background()); err != nil || n != 4 {
			t.Fatalf("a queue of the namespace reads %d shards, %v", n, err)
		}
		if out := c.ok("stats").stdout; !strings.Contains(out, "shards") {
			t.Fatalf("table stats do not mention the shards:\n%s", out)
		}
		// Export covers every shard; import into a namespace of another
		// shard count keeps every timer.
		dump := c.ok("export").stdout
		if n := strings.Count(dump, "\n"); n != 40 {
			t.Fatalf("export wrote %d lines, want 40", n)
		}
		other := newCLI(t, b)
		other.ok("namespace", "create", other.ns, "--shards", "16")
		other.runCtx(context.Background(), dump, "import", "-")
		var got stats
		if err := json.Unmarshal([]byte(other.ok("-o", "json", "stats").stdout), &got); err != nil || got.Scheduled != 40 || len(got.Shards) != 16 {
			t.Fatalf("after import into 16 shards: %+v", got)
		}
		if again := other.ok("export").stdout; again != dump {
			t.Fatalf("export after import differs:\n%s\nvs\n%s", again, dump)
		}
	})
}

// TestNamespaceShowSaysOneShard: "1 shard", not "1 shards", in namespace
// show and create, and in the refusal of another shard count.
func TestNamespaceShowSaysOneShard(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		c := newCLI(t, b)
		if out := c.ok("namespace", "create", c.ns, "--shards", "1").stdout; !strings.Contains(out, "with 1 shard\n") {
			t.Fatalf("namespace create --shards 1: %q", out)
		}
		if out := c.ok("namespace", "show").stdout; !strings.Contains(out, "has 1 shard\n") {
			t.Fatalf("namespace show: %q", out)
		}
		other := newCLI(t, b)
		if out := other.ok("namespace", "show").stdout; !strings.Contains(out, "has 1 shard\n") {
			t.Fatalf("namespace show of an uncreated namespace: %q", out)
		}
		q, err := queue.New(b.Client, queue.Options{Namespace: other.ns, Shards: 4})
		if err == nil {
			defer q.Close()
			_, err = q.Inspect().Shards(context.Background())
		}
		if err == nil || strings.Contains(err.Error(), "1 shards") || !strings.Contains(err.Error(), "1 shard;") {
			t.Fatalf("Shards 4 on a namespace of 1: %v; want it to say 1 shard", err)
		}
	})
}

// TestNamespaceCreateOverUsedNamespace: sharding a namespace that holds
// timers is refused as a conflict, and the fix is timerctl's way to copy
// them, not the Go calls package queue names.
func TestNamespaceCreateOverUsedNamespace(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		c := newCLI(t, b)
		c.ok("schedule", "a", "--in", "1h")
		r := c.run("namespace", "create", c.ns, "--shards", "4")
		if r.code != ctl.ExitConflict || !strings.Contains(r.stderr, "timerctl export | timerctl -n NEW import") || strings.Contains(r.stderr, "Restore") {
			t.Fatalf("sharding a used namespace: exit %d %q, want %d and timerctl's way to copy it", r.code, r.stderr, ctl.ExitConflict)
		}
	})
}
