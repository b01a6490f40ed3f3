package ctl_test

import (
	"context"
	"encoding/json"
	"errors"
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
		// A replicas setting refused (no replica here to spare; out of
		// range) is refused before the namespace is created: nothing is
		// written, so the namespace may still be created with other flags.
		for _, n := range []string{"1", "17"} {
			if r := c.run("namespace", "create", c.ns, "--shards", "4", "--replicas", n); r.code == 0 {
				t.Fatalf("create --replicas %s on a server without replicas: exit 0 %q", n, r.stdout)
			}
			if keys := c.keys(); len(keys) != 0 {
				t.Fatalf("a refused create --replicas %s wrote %v", n, keys)
			}
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
		// The shared server has no replica (miniredis none that it tells):
		// refused without --force.
		if r := c.run("namespace", "create", c.ns, "--shards", "4", "--replicas", "1"); r.code == 0 || !strings.Contains(r.stderr, "--force") {
			t.Fatalf("--replicas 1 without a replica: exit %d %q; want a refusal naming --force", r.code, r.stderr)
		}
		if got := decode[ns](t, c.ok("-o", "json", "namespace", "show").stdout); got.Replicas != 0 {
			t.Fatalf("show after a refused --replicas 1 = %+v", got)
		}
		if out := c.ok("namespace", "create", c.ns, "--shards", "4", "--replicas", "1", "--force").stdout; !strings.Contains(out, "replicas set to 1") {
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

// TestNamespaceReplicasNeedASpareOnCluster: on a 3+3 Cluster (one replica
// per master, as `redis-cli --cluster create --cluster-replicas 1` makes
// it), `namespace create --replicas 1` and queue.SetReplicas(1) are refused,
// naming every master and its one replica, because a master's failover
// would leave the promoted replica with none and its shards unable to
// commit; --force sets it. The shared 3+0 Cluster is refused too; both
// take --replicas 0.
func TestNamespaceReplicasNeedASpareOnCluster(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, tc := range []struct {
		name     string
		cluster  func(t *testing.T) *redistest.Cluster
		replicas string
	}{
		{"3+3", func(t *testing.T) *redistest.Cluster {
			return redistest.StartClusterOpts(t, redistest.ClusterConfig{ReplicasPerMaster: 1})
		}, "1 replica"},
		{"3+0", func(t *testing.T) *redistest.Cluster { return redistest.SharedCluster(t) }, "0 replicas"},
	} {
		cl := tc.cluster(t)
		rdb := cl.Client(t)
		ns := redistest.Namespace(t)
		q, err := queue.New(rdb, queue.Options{Namespace: ns})
		if err != nil {
			t.Fatal(err)
		}
		defer q.Close()
		c := &cli{t: t, b: &redistest.Backend{Name: tc.name, Client: rdb, Cluster: cl}, url: cl.URL(), ns: ns, q: q}

		// Refused before anything is written, and against the masters of
		// the 16 shards asked for, not the one master of the default
		// layout of a namespace not yet created.
		r := c.run("namespace", "create", ns, "--shards", "16", "--replicas", "1")
		if r.code != ctl.ExitConflict {
			t.Fatalf("%s: --replicas 1: exit %d %q; want %d", tc.name, r.code, r.stderr, ctl.ExitConflict)
		}
		if keys := c.keys(); len(keys) != 0 {
			t.Fatalf("%s: the refused create --replicas 1 wrote %v", tc.name, keys)
		}
		for _, m := range cl.Nodes {
			if want := "master " + m.Addr() + " has " + tc.replicas + " in sync"; !strings.Contains(r.stderr, want) {
				t.Errorf("%s: the refusal %q does not say %q", tc.name, r.stderr, want)
			}
		}
		for _, want := range []string{"needs 2 replicas", "turn the setting off (0)", "--force"} {
			if !strings.Contains(r.stderr, want) {
				t.Errorf("%s: the refusal %q does not say %q", tc.name, r.stderr, want)
			}
		}
		c.ok("namespace", "create", ns, "--shards", "16", "--replicas", "0")
		err = queue.SetReplicas(ctx, rdb, ns, 1, nil)
		var few *queue.TooFewReplicasError
		if !errors.As(err, &few) || !errors.Is(err, queue.ErrTooFewReplicas) || len(few.Short) != 3 {
			t.Fatalf("%s: SetReplicas 1: %v; want ErrTooFewReplicas naming the 3 masters", tc.name, err)
		}
		if n, err := q.Inspect().Replicas(ctx); err != nil || n != 0 {
			t.Fatalf("%s: after the refusals the setting reads %d, %v; want 0", tc.name, n, err)
		}
		if out := c.ok("namespace", "create", ns, "--shards", "16", "--replicas", "1", "--force").stdout; !strings.Contains(out, "replicas set to 1") {
			t.Fatalf("%s: --replicas 1 --force: %q", tc.name, out)
		}
	}
}
