package redistest

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Cluster is a Redis Cluster of masters without replicas, owned by one test
// (StartCluster) or shared by a test binary (SharedCluster).
type Cluster struct {
	Servers []*Server
}

// StartCluster starts a Cluster of masters (1..16) on free ports and stops
// every server by pid when the test ends. Three or more masters are joined
// with `redis-cli --cluster create --cluster-yes`, which spreads the 16384
// slots evenly; one or two get their slots with CLUSTER ADDSLOTSRANGE
// (redis-cli refuses fewer than three). It returns once every node reports
// cluster_state:ok and knows every other.
func StartCluster(t testing.TB, masters int) *Cluster {
	t.Helper()
	c, err := startCluster(t, masters)
	if err != nil {
		t.Fatalf("redistest: %v", err)
	}
	return c
}

func startCluster(t testing.TB, masters int) (*Cluster, error) {
	if _, err := exec.LookPath("redis-cli"); err != nil {
		return nil, fmt.Errorf("redis-cli not found on PATH; install it (apt-get install redis-tools)")
	}
	if masters < 1 || masters > 16 {
		return nil, fmt.Errorf("cluster of %d masters: use 1..16", masters)
	}
	c := &Cluster{}
	for range masters {
		dir := t.TempDir()
		s := Start(t, Config{Args: []string{
			"--cluster-enabled", "yes",
			"--cluster-config-file", filepath.Join(dir, "nodes.conf"),
			"--cluster-node-timeout", "5000",
		}})
		c.Servers = append(c.Servers, s)
	}
	ctx := context.Background()
	if masters >= 3 {
		args := []string{"--cluster", "create"}
		for _, s := range c.Servers {
			args = append(args, s.Addr())
		}
		args = append(args, "--cluster-replicas", "0", "--cluster-yes")
		out, err := exec.Command("redis-cli", args...).CombinedOutput()
		if err != nil {
			return nil, fmt.Errorf("redis-cli --cluster create: %v\n%s", err, out)
		}
	} else {
		per := 16384 / masters
		for i, s := range c.Servers {
			cl := redis.NewClient(&redis.Options{Addr: s.Addr()})
			hi := (i+1)*per - 1
			if i == masters-1 {
				hi = 16383
			}
			err := cl.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", i*per, hi).Err()
			if err == nil && i > 0 {
				host, port, _ := strings.Cut(c.Servers[0].Addr(), ":")
				err = cl.ClusterMeet(ctx, host, port).Err()
			}
			cl.Close()
			if err != nil {
				return nil, fmt.Errorf("assigning slots to %s: %v", s.Addr(), err)
			}
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, s := range c.Servers {
		cl := redis.NewClient(&redis.Options{Addr: s.Addr()})
		for {
			info, err := cl.ClusterInfo(ctx).Result()
			if err == nil && strings.Contains(info, "cluster_state:ok") &&
				strings.Contains(info, fmt.Sprintf("cluster_known_nodes:%d\r", masters)) {
				break
			}
			if time.Now().After(deadline) {
				cl.Close()
				return nil, fmt.Errorf("cluster not ok within 30s on %s: %q %v", s.Addr(), info, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
		cl.Close()
	}
	return c, nil
}

// Addrs are the masters' host:port.
func (c *Cluster) Addrs() []string {
	out := make([]string, len(c.Servers))
	for i, s := range c.Servers {
		out[i] = s.Addr()
	}
	return out
}

// URL is a redis:// URL of the Cluster, as redis.ParseClusterURL reads it.
func (c *Cluster) URL() string {
	u := "redis://" + c.Servers[0].Addr()
	for i, s := range c.Servers[1:] {
		sep := "&"
		if i == 0 {
			sep = "?"
		}
		u += sep + "addr=" + s.Addr()
	}
	return u
}

// Client returns a Cluster client, closed when the test ends.
func (c *Cluster) Client(t testing.TB) *redis.ClusterClient {
	cl := c.NewClient()
	t.Cleanup(func() { cl.Close() })
	return cl
}

// NewClient returns a Cluster client the caller closes.
func (c *Cluster) NewClient() *redis.ClusterClient {
	return redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs()})
}

// ServerFor returns the master that serves key's slot now.
func (c *Cluster) ServerFor(t testing.TB, key string) *Server {
	t.Helper()
	for _, s := range c.Servers {
		cl := redis.NewClient(&redis.Options{Addr: s.Addr()})
		slot, err := cl.ClusterKeySlot(context.Background(), key).Result()
		if err == nil {
			var nodes []redis.ClusterSlot
			nodes, err = cl.ClusterSlots(context.Background()).Result()
			for _, r := range nodes {
				if int64(r.Start) <= slot && slot <= int64(r.End) {
					cl.Close()
					for _, s2 := range c.Servers {
						if s2.Addr() == r.Nodes[0].Addr {
							return s2
						}
					}
				}
			}
		}
		cl.Close()
		if err != nil {
			t.Fatalf("redistest: slot of %q: %v", key, err)
		}
	}
	t.Fatalf("redistest: no master serves %q", key)
	return nil
}

var shared struct {
	sync.Mutex
	c   *Cluster
	t   *sharedTB
	err error
}

// SharedCluster returns a 3-master Cluster shared by every test of the
// binary, started on first use. The binary's TestMain must call
// StopShared after m.Run, or the servers outlive it.
func SharedCluster(t testing.TB) *Cluster {
	t.Helper()
	Require(t)
	shared.Lock()
	defer shared.Unlock()
	if shared.c == nil && shared.err == nil {
		shared.t = &sharedTB{}
		func() {
			defer func() {
				if r := recover(); r != nil { // sharedTB.Fatalf
					shared.err = fmt.Errorf("%v", r)
				}
			}()
			shared.c, shared.err = startCluster(shared.t, 3)
		}()
	}
	if shared.err != nil {
		t.Fatalf("redistest: shared cluster: %v", shared.err)
	}
	return shared.c
}

// StopShared stops the shared Cluster, if one was started.
func StopShared() {
	shared.Lock()
	defer shared.Unlock()
	if shared.t != nil {
		shared.t.cleanup()
	}
	shared.c, shared.t, shared.err = nil, nil, nil
}

// CommandCalls returns, per master address, how many times it ran cmd (a
// lower-case command name, such as "evalsha"), from INFO commandstats.
func (c *Cluster) CommandCalls(t testing.TB, cmd string) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	for _, s := range c.Servers {
		cl := redis.NewClient(&redis.Options{Addr: s.Addr()})
		info, err := cl.Info(context.Background(), "commandstats").Result()
		cl.Close()
		if err != nil {
			t.Fatalf("redistest: INFO commandstats of %s: %v", s.Addr(), err)
		}
		prefix := "cmdstat_" + cmd + ":calls="
		for _, line := range strings.Split(info, "\n") {
			if strings.HasPrefix(line, prefix) {
				var calls int64
				fmt.Sscanf(strings.TrimPrefix(line, prefix), "%d", &calls)
				out[s.Addr()] = calls
			}
		}
	}
	return out
}

// MigrateSlot moves slot to the master to, as redis-cli --cluster reshard
// does: CLUSTER SETSLOT IMPORTING on the target and MIGRATING on the
// source, MIGRATE of every key of the slot, one key at a time with pause
// after each (so a test can act while the slot is half moved), then
// CLUSTER SETSLOT NODE on every master. It returns when the move is done.
func (c *Cluster) MigrateSlot(t testing.TB, slot int, to *Server, pause time.Duration) error {
	ctx := context.Background()
	client := func(s *Server) *redis.Client { return redis.NewClient(&redis.Options{Addr: s.Addr()}) }
	var from *Server
	ids := map[*Server]string{}
	for _, s := range c.Servers {
		cl := client(s)
		id, err := cl.Do(ctx, "CLUSTER", "MYID").Text()
		if err != nil {
			cl.Close()
			return err
		}
		ids[s] = id
		slots, err := cl.ClusterSlots(ctx).Result()
		cl.Close()
		if err != nil {
			return fmt.Errorf("CLUSTER SLOTS on %s: %w", s.Addr(), err)
		}
		for _, r := range slots {
			if r.Start <= slot && slot <= r.End && r.Nodes[0].ID == id {
				from = s
			}
		}
	}
	if from == nil || from == to {
		return fmt.Errorf("slot %d: source %v, target %s", slot, from, to.Addr())
	}
	src, dst := client(from), client(to)
	defer src.Close()
	defer dst.Close()
	if err := dst.Do(ctx, "CLUSTER", "SETSLOT", slot, "IMPORTING", ids[from]).Err(); err != nil {
		return err
	}
	if err := src.Do(ctx, "CLUSTER", "SETSLOT", slot, "MIGRATING", ids[to]).Err(); err != nil {
		return err
	}
	host, port, _ := strings.Cut(to.Addr(), ":")
	for {
		keys, err := src.ClusterGetKeysInSlot(ctx, slot, 10).Result()
		if err != nil {
			return err
		}
		if len(keys) == 0 {
			break
		}
		for _, k := range keys {
			if err := src.Migrate(ctx, host, port, k, 0, 10*time.Second).Err(); err != nil && err.Error() != "NOKEY" {
				return fmt.Errorf("MIGRATE %s: %w", k, err)
			}
			time.Sleep(pause)
		}
	}
	for _, s := range append([]*Server{to, from}, c.Servers...) {
		cl := client(s)
		err := cl.Do(ctx, "CLUSTER", "SETSLOT", slot, "NODE", ids[to]).Err()
		cl.Close()
		if err != nil {
			return fmt.Errorf("SETSLOT NODE on %s: %w", s.Addr(), err)
		}
	}
	return nil
}
