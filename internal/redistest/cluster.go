package redistest

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Cluster is a Redis Cluster of masters owned by one test.
type Cluster struct {
	Nodes []*Server
	tls   bool
}

// StartCluster starts n masters (--cluster-enabled yes), joins them with
// CLUSTER MEET, spreads the 16384 slots evenly and waits for
// cluster_state:ok. Node i listens on 127.0.0.(i+1), so that each node has
// an address, and with pki a certificate, of its own: a client that checks
// every node against the first node's name fails on the others. With pki
// the nodes speak TLS only, on the client port and on the cluster bus.
func StartCluster(t testing.TB, n int, pki *PKI) *Cluster {
	t.Helper()
	c := &Cluster{tls: pki != nil}
	for i := range n {
		ip := fmt.Sprintf("127.0.0.%d", i+1)
		bus := freePort(t)
		cfg := Config{Bind: ip, Args: []string{"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
			"--cluster-port", fmt.Sprint(bus), "--cluster-announce-ip", ip}}
		if pki != nil {
			cfg.TLS = pki.ServerTLS(false, ip)
			cfg.Args = append(cfg.Args, "--tls-cluster", "yes")
		}
		s := Start(t, cfg)
		s.bus = bus
		c.Nodes = append(c.Nodes, s)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	first := c.Nodes[0].Client(t)
	for _, s := range c.Nodes[1:] {
		host, port, _ := net.SplitHostPort(s.Addr())
		if err := first.Do(ctx, "CLUSTER", "MEET", host, port, s.bus).Err(); err != nil {
			t.Fatalf("redistest: CLUSTER MEET %s: %v", s.Addr(), err)
		}
	}
	for i, s := range c.Nodes {
		lo, hi := i*16384/n, (i+1)*16384/n-1
		if err := s.Client(t).Do(ctx, "CLUSTER", "ADDSLOTSRANGE", lo, hi).Err(); err != nil {
			t.Fatalf("redistest: CLUSTER ADDSLOTSRANGE on %s: %v", s.Addr(), err)
		}
	}
	for _, s := range c.Nodes {
		cl := s.Client(t)
		for {
			info, err := cl.ClusterInfo(ctx).Result()
			if err == nil && strings.Contains(info, "cluster_state:ok") && strings.Contains(info, fmt.Sprintf("cluster_known_nodes:%d", n)) {
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("redistest: cluster not ok within 30s: %v\n%s\n%s", err, info, s.logTail())
			}
			// Polling with a deadline: the nodes gossip their way to
			// cluster_state:ok and announce it nowhere but CLUSTER INFO.
			time.Sleep(50 * time.Millisecond)
		}
	}
	return c
}

// URL is a --redis URL of the cluster: every node as a seed, rediss://
// with TLS.
func (c *Cluster) URL() string {
	scheme := "redis://"
	if c.tls {
		scheme = "rediss://"
	}
	u := scheme + c.Nodes[0].Addr() + "?"
	for i, s := range c.Nodes[1:] {
		if i > 0 {
			u += "&"
		}
		u += "addr=" + s.Addr()
	}
	return u
}

// Addrs are the masters' host:port.
func (c *Cluster) Addrs() []string {
	out := make([]string, len(c.Nodes))
	for i, s := range c.Nodes {
		out[i] = s.Addr()
	}
	return out
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
	for _, s := range c.Nodes {
		cl := redis.NewClient(&redis.Options{Addr: s.Addr()})
		slot, err := cl.ClusterKeySlot(context.Background(), key).Result()
		if err == nil {
			var nodes []redis.ClusterSlot
			nodes, err = cl.ClusterSlots(context.Background()).Result()
			for _, r := range nodes {
				if int64(r.Start) <= slot && slot <= int64(r.End) {
					cl.Close()
					for _, s2 := range c.Nodes {
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

// SharedCluster returns a 3-master Cluster shared by every test of the
// binary, started on first use and stopped when the tests run through
// Shared end. Tests on it keep to their own namespaces and move no slots.
func SharedCluster(t testing.TB) *Cluster {
	t.Helper()
	Require(t)
	sharedCluster.Lock()
	defer sharedCluster.Unlock()
	sharedCluster.start(t, func(tb testing.TB) { sharedCluster.c = StartCluster(tb, 3, nil) })
	return sharedCluster.c
}

// CommandCalls returns, per master address, how many times it ran cmd (a
// lower-case command name, such as "evalsha"), from INFO commandstats.
func (c *Cluster) CommandCalls(t testing.TB, cmd string) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	for _, s := range c.Nodes {
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
	for _, s := range c.Nodes {
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
			// Real time on purpose: the caller's pause keeps the slot
			// half moved long enough to act on it.
			time.Sleep(pause)
		}
	}
	for _, s := range append([]*Server{to, from}, c.Nodes...) {
		cl := client(s)
		err := cl.Do(ctx, "CLUSTER", "SETSLOT", slot, "NODE", ids[to]).Err()
		cl.Close()
		if err != nil {
			return fmt.Errorf("SETSLOT NODE on %s: %w", s.Addr(), err)
		}
	}
	return nil
}
