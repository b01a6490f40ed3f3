package redistest

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestClusterReplicasFailover: StartClusterOpts returns with every replica
// in sync (a write on a master is on its replica), Master and ReplicasOf
// tell the roles, Stop freezes a node without killing it, and after Kill
// of a master WaitPromoted returns its replica, now the master of the key.
func TestClusterReplicasFailover(t *testing.T) {
	Require(t)
	c := StartClusterOpts(t, ClusterConfig{Masters: 3, ReplicasPerMaster: 1, NodeTimeout: 1000 * time.Millisecond,
		Args: []string{"--appendonly", "yes", "--appendfsync", "always"}})
	if len(c.Nodes) != 3 || len(c.Replicas) != 3 || len(c.Addrs()) != 6 {
		t.Fatalf("%d masters, %d replicas, %d addrs", len(c.Nodes), len(c.Replicas), len(c.Addrs()))
	}
	ctx := context.Background()
	cl := c.Client(t)
	const key = "{k}x"
	if err := cl.Set(ctx, key, "v1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	m := c.Master(t, key)
	reps := c.ReplicasOf(t, m)
	if len(reps) != 1 {
		t.Fatalf("replicas of %s: %v", m.Addr(), reps)
	}
	rc := reps[0].Client(t)
	Eventually(t, 10*time.Second, "the write on the replica", func() bool {
		return replicaHas(ctx, rc, key)
	})

	c.Stop(m)
	frozen := m.newClient(&redis.Options{ReadTimeout: 200 * time.Millisecond, MaxRetries: -1})
	err := frozen.Ping(ctx).Err()
	frozen.Close()
	if err == nil {
		t.Fatal("a stopped master answered PING")
	}
	c.Cont(m)
	if err := m.Client(t).Ping(ctx).Err(); err != nil {
		t.Fatalf("PING after Cont: %v", err)
	}

	pid := m.Pid()
	c.Kill(m)
	if m.Pid() != 0 || pid == 0 {
		t.Fatalf("pid %d before Kill, %d after", pid, m.Pid())
	}
	promoted, at := c.WaitPromoted(t, m, 30*time.Second)
	if promoted != reps[0] || at.IsZero() {
		t.Fatalf("promoted %v at %v, want %s", promoted, at, reps[0].Addr())
	}
	if now := c.Master(t, key); now != promoted {
		t.Fatalf("master of %q after the failover: %s, want %s", key, now.Addr(), promoted.Addr())
	}
	if v, err := promoted.Client(t).Get(ctx, key).Result(); err != nil || v != "v1" {
		t.Fatalf("GET on the promoted replica: %q, %v", v, err)
	}
}

// replicaHas reads key on a replica with READONLY.
func replicaHas(ctx context.Context, rc *redis.Client, key string) bool {
	conn := rc.Conn()
	defer conn.Close()
	if err := conn.ReadOnly(ctx).Err(); err != nil {
		return false
	}
	v, _ := conn.Get(ctx, key).Result()
	return v == "v1"
}
