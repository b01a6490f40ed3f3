package redistest

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Cluster is a Redis Cluster owned by one test.
type Cluster struct {
	// Nodes are the masters as started. A failover changes roles, not
	// this list: ask Master and ReplicasOf for the roles now.
	Nodes []*Server
	// Replicas are the replicas as started (ClusterConfig.ReplicasPerMaster
	// per master), in master order.
	Replicas []*Server
	tls      bool
	// ids are the nodes' cluster IDs (CLUSTER MYID).
	ids map[*Server]string
}

// ClusterConfig describes a Cluster for StartClusterOpts.
type ClusterConfig struct {
	// Masters is the number of masters; the 16384 slots are spread
	// evenly over them. 0 means 3.
	Masters int
	// ReplicasPerMaster is the number of replicas each master gets
	// (CLUSTER REPLICATE); 0 means none.
	ReplicasPerMaster int
	// NodeTimeout is cluster-node-timeout: how long a master may be
	// unreachable before its replica is promoted. 0 leaves the server's
	// default (15 s).
	NodeTimeout time.Duration
	// Args are more redis-server arguments for every node, such as
	// "--appendonly", "yes", "--appendfsync", "always".
	Args []string
	// PKI, when set, makes every node speak TLS only, on the client port
	// and on the cluster bus.
	PKI *PKI
}

// StartCluster starts n masters (--cluster-enabled yes), joins them with
// CLUSTER MEET, spreads the 16384 slots evenly and waits for
// cluster_state:ok. Node i listens on 127.0.0.(i+1), so that each node has
// an address, and with pki a certificate, of its own: a client that checks
// every node against the first node's name fails on the others. With pki
// the nodes speak TLS only, on the client port and on the cluster bus.
func StartCluster(t testing.TB, n int, pki *PKI) *Cluster {
	t.Helper()
	return StartClusterOpts(t, ClusterConfig{Masters: n, PKI: pki})
}

// StartClusterOpts starts a Cluster as StartCluster does, with the
// replicas, node timeout and server arguments of cfg. Replicas listen on
// the addresses after the masters' and join with CLUSTER REPLICATE; it
// returns once every replica is in sync (master_link_status:up) and its
// master lists it online, every node knows every other and its role, and
// cluster_state is ok on all.
func StartClusterOpts(t testing.TB, cfg ClusterConfig) *Cluster {
	t.Helper()
	n := cfg.Masters
	if n == 0 {
		n = 3
	}
	total := n * (1 + cfg.ReplicasPerMaster)
	c := &Cluster{tls: cfg.PKI != nil, ids: map[*Server]string{}}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c.startNodes(t, ctx, cfg, n, total)
	c.meetAndAssign(t, ctx)
	c.replicate(t, ctx, cfg.ReplicasPerMaster, total)
	c.waitAll(t, ctx, "cluster_state:ok with every role known", func(s *Server, cl *redis.Client) (bool, string) {
		return c.ready(ctx, cl, n, total)
	})
	return c
}

// startNodes starts the total nodes of cfg, the first n to be masters,
// and reads their cluster IDs.
func (c *Cluster) startNodes(t testing.TB, ctx context.Context, cfg ClusterConfig, n, total int) {
	t.Helper()
	for i := range total {
		s := Start(t, nodeConfig(cfg, fmt.Sprintf("127.0.0.%d", i+1)))
		id, err := s.Client(t).Do(ctx, "CLUSTER", "MYID").Text()
		if err != nil {
			t.Fatalf("redistest: CLUSTER MYID on %s: %v", s.Addr(), err)
		}
		c.ids[s] = id
		if i < n {
			c.Nodes = append(c.Nodes, s)
		} else {
			c.Replicas = append(c.Replicas, s)
		}
	}
}

// nodeConfig is the Config of the cluster node that listens on ip.
func nodeConfig(cfg ClusterConfig, ip string) Config {
	sc := Config{Bind: ip, ClusterBus: true, Args: []string{"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
		"--cluster-announce-ip", ip}}
	if cfg.NodeTimeout > 0 {
		sc.Args = append(sc.Args, "--cluster-node-timeout", fmt.Sprint(cfg.NodeTimeout.Milliseconds()))
	}
	sc.Args = append(sc.Args, cfg.Args...)
	if cfg.PKI != nil {
		sc.TLS = cfg.PKI.ServerTLS(false, ip)
		sc.Args = append(sc.Args, "--tls-cluster", "yes")
	}
	return sc
}

// meetAndAssign joins every node to the first with CLUSTER MEET and
// spreads the 16384 slots evenly over the masters.
func (c *Cluster) meetAndAssign(t testing.TB, ctx context.Context) {
	t.Helper()
	all := c.All()
	first := c.Nodes[0].Client(t)
	for _, s := range all[1:] {
		host, port, _ := net.SplitHostPort(s.Addr())
		if err := first.Do(ctx, "CLUSTER", "MEET", host, port, s.bus).Err(); err != nil {
			t.Fatalf("redistest: CLUSTER MEET %s: %v", s.Addr(), err)
		}
	}
	n := len(c.Nodes)
	for i, s := range c.Nodes {
		lo, hi := i*16384/n, (i+1)*16384/n-1
		if err := s.Client(t).Do(ctx, "CLUSTER", "ADDSLOTSRANGE", lo, hi).Err(); err != nil {
			t.Fatalf("redistest: CLUSTER ADDSLOTSRANGE on %s: %v", s.Addr(), err)
		}
	}
}

// replicate makes each replica follow its master once every node knows
// the total, and waits until each is in sync and its master lists it
// online.
func (c *Cluster) replicate(t testing.TB, ctx context.Context, perMaster, total int) {
	t.Helper()
	// A replica can follow only a master it knows: wait for the gossip.
	c.waitAll(t, ctx, "every node known", func(s *Server, cl *redis.Client) (bool, string) {
		info, err := cl.ClusterInfo(ctx).Result()
		return err == nil && strings.Contains(info, fmt.Sprintf("cluster_known_nodes:%d", total)), fmt.Sprint(info, err)
	})
	for i, s := range c.Replicas {
		m := c.Nodes[i/perMaster]
		if err := s.Client(t).Do(ctx, "CLUSTER", "REPLICATE", c.ids[m]).Err(); err != nil {
			t.Fatalf("redistest: CLUSTER REPLICATE %s on %s: %v", m.Addr(), s.Addr(), err)
		}
	}
	for _, s := range c.Replicas {
		c.waitNode(t, ctx, s, "replica in sync", func(cl *redis.Client) (bool, string) {
			info, err := cl.Info(ctx, "replication").Result()
			return err == nil && strings.Contains(info, "master_link_status:up") &&
				strings.Contains(info, "master_sync_in_progress:0"), fmt.Sprint(info, err)
		})
	}
	// A master lists a replica state=online only after the replica saw
	// its link up: the state queue.SetReplicas counts as in sync.
	if perMaster > 0 {
		for _, m := range c.Nodes {
			c.waitNode(t, ctx, m, "replicas online", func(cl *redis.Client) (bool, string) {
				info, err := cl.Info(ctx, "replication").Result()
				return err == nil && strings.Count(info, "state=online") == perMaster, fmt.Sprint(info, err)
			})
		}
	}
}

// ready reports whether the node of cl sees cluster_state:ok, all total
// nodes, and n masters and every replica in their roles.
func (c *Cluster) ready(ctx context.Context, cl *redis.Client, n, total int) (bool, string) {
	info, err := cl.ClusterInfo(ctx).Result()
	if err != nil || !strings.Contains(info, "cluster_state:ok") || !strings.Contains(info, fmt.Sprintf("cluster_known_nodes:%d", total)) {
		return false, fmt.Sprint(info, err)
	}
	nodes, err := cl.ClusterNodes(ctx).Result()
	if err != nil {
		return false, err.Error()
	}
	masters, replicas := countRoles(nodes)
	return masters == n && replicas == len(c.Replicas), nodes
}

// countRoles counts the healthy masters and replicas of a CLUSTER NODES
// reply.
func countRoles(nodes string) (masters, replicas int) {
	for _, line := range strings.Split(strings.TrimSpace(nodes), "\n") {
		f := strings.Fields(line)
		if len(f) < 3 {
			continue
		}
		flags := "," + f[2] + ","
		switch {
		case strings.Contains(flags, ",fail") || strings.Contains(flags, ",handshake,") || strings.Contains(flags, ",noaddr,"):
		case strings.Contains(flags, ",master,"):
			masters++
		case strings.Contains(flags, ",slave,"):
			replicas++
		}
	}
	return masters, replicas
}

// All returns every node as started: the masters, then the replicas.
func (c *Cluster) All() []*Server {
	return append(append([]*Server(nil), c.Nodes...), c.Replicas...)
}

// waitNode polls cond on s until it holds, failing the test when ctx ends.
func (c *Cluster) waitNode(t testing.TB, ctx context.Context, s *Server, what string, cond func(*redis.Client) (bool, string)) {
	t.Helper()
	cl := s.newClient(&redis.Options{MaxRetries: -1})
	defer cl.Close()
	for {
		ok, state := cond(cl)
		if ok {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("redistest: %s: not on %s in time:\n%s\n%s", what, s.Addr(), state, s.logTail())
		}
		// Polling with a deadline: the nodes gossip their way to the
		// state and announce it nowhere but INFO and CLUSTER INFO.
		time.Sleep(20 * time.Millisecond)
	}
}

// waitAll polls cond on every live node (see waitNode).
func (c *Cluster) waitAll(t testing.TB, ctx context.Context, what string, cond func(*Server, *redis.Client) (bool, string)) {
	t.Helper()
	for _, s := range c.All() {
		if !s.alive() {
			continue
		}
		c.waitNode(t, ctx, s, what, func(cl *redis.Client) (bool, string) { return cond(s, cl) })
	}
}

// URL is a --redis URL of the cluster: every node as a seed, rediss://
// with TLS.
func (c *Cluster) URL() string {
	scheme := "redis://"
	if c.tls {
		scheme = "rediss://"
	}
	all := c.All()
	u := scheme + all[0].Addr() + "?"
	for i, s := range all[1:] {
		if i > 0 {
			u += "&"
		}
		u += "addr=" + s.Addr()
	}
	return u
}

// Addrs are every node's host:port, masters first: seeds a client can
// still reach when a master is down.
func (c *Cluster) Addrs() []string {
	var out []string
	for _, s := range c.All() {
		out = append(out, s.Addr())
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

// ServerFor returns the master that serves key's slot now, as the first
// live node that answers sees it.
func (c *Cluster) ServerFor(t testing.TB, key string) *Server {
	t.Helper()
	return c.Master(t, key)
}

// Master returns the master that serves key's slot now, as the first live
// node that answers sees it; a node that has not yet heard of a failover
// may name the old master.
func (c *Cluster) Master(t testing.TB, key string) *Server {
	t.Helper()
	ctx := context.Background()
	var lastErr error
	for _, s := range c.All() {
		if !s.alive() {
			continue
		}
		cl := s.newClient(&redis.Options{MaxRetries: -1})
		slot, err := cl.ClusterKeySlot(ctx, key).Result()
		var id string
		if err == nil {
			id, err = slotOwner(ctx, cl, slot)
		}
		cl.Close()
		if err != nil {
			lastErr = err
			continue
		}
		if m := c.byID(id); m != nil {
			return m
		}
		t.Fatalf("redistest: no master serves %q (slot %d) according to %s", key, slot, s.Addr())
	}
	t.Fatalf("redistest: no live node told the master of %q: %v", key, lastErr)
	return nil
}

// slotOwner returns the ID of the master that serves slot, as the node cl
// talks to sees it (CLUSTER SHARDS), or "" when none does. From Redis 7.2 a
// shard also lists a failed master that a replica replaced, so an online
// master is preferred.
func slotOwner(ctx context.Context, cl *redis.Client, slot int64) (string, error) {
	shards, err := cl.ClusterShards(ctx).Result()
	if err != nil {
		return "", err
	}
	for _, sh := range shards {
		if !slices.ContainsFunc(sh.Slots, func(r redis.SlotRange) bool { return r.Start <= slot && slot <= r.End }) {
			continue
		}
		owner := ""
		for _, n := range sh.Nodes {
			if n.Role == "master" && (owner == "" || n.Health == "online") {
				owner = n.ID
			}
		}
		return owner, nil
	}
	return "", nil
}

func (c *Cluster) byID(id string) *Server {
	for s, sid := range c.ids {
		if id != "" && sid == id {
			return s
		}
	}
	return nil
}

// ID is s's cluster node ID.
func (c *Cluster) ID(s *Server) string { return c.ids[s] }

// ReplicasOf returns the replicas of master now, as the first live node
// that answers sees them in CLUSTER NODES (failed nodes left out).
func (c *Cluster) ReplicasOf(t testing.TB, master *Server) []*Server {
	t.Helper()
	nodes := c.clusterNodes(t)
	var out []*Server
	for _, line := range strings.Split(strings.TrimSpace(nodes), "\n") {
		f := strings.Fields(line)
		if len(f) < 4 || f[3] != c.ids[master] {
			continue
		}
		flags := "," + f[2] + ","
		if !strings.Contains(flags, ",slave,") || strings.Contains(flags, ",fail") {
			continue
		}
		for s, id := range c.ids {
			if id == f[0] {
				out = append(out, s)
			}
		}
	}
	return out
}

// clusterNodes is CLUSTER NODES from the first live node that answers.
func (c *Cluster) clusterNodes(t testing.TB) string {
	t.Helper()
	var lastErr error
	for _, s := range c.All() {
		if !s.alive() {
			continue
		}
		cl := s.newClient(&redis.Options{MaxRetries: -1})
		nodes, err := cl.ClusterNodes(context.Background()).Result()
		cl.Close()
		if err == nil {
			return nodes
		}
		lastErr = err
	}
	t.Fatalf("redistest: no live node answered CLUSTER NODES: %v", lastErr)
	return ""
}

// Kill kills s with SIGKILL, as a crash would, and reaps it.
func (c *Cluster) Kill(s *Server) { s.Kill9() }

// Stop freezes s with SIGSTOP: its sockets stay open and unanswered, as
// with a hung host. Cont, or the end of the test, resumes it.
func (c *Cluster) Stop(s *Server) { s.Pause() }

// Cont resumes a server frozen by Stop (SIGCONT).
func (c *Cluster) Cont(s *Server) { s.Continue() }

// WaitPromoted waits up to d for one of old's replicas to become a master,
// and then for cluster_state:ok on every live node. Call it before the
// failover completes (right after Kill or Stop of old): it finds old's
// replicas in CLUSTER NODES. It returns the promoted node and when it was
// first seen as master (polled every 10 ms), the instant a test measures
// recovery from.
func (c *Cluster) WaitPromoted(t testing.TB, old *Server, d time.Duration) (*Server, time.Time) {
	t.Helper()
	cands := c.ReplicasOf(t, old)
	if len(cands) == 0 {
		t.Fatalf("redistest: %s has no replica to promote (or it has been promoted already: call WaitPromoted before the failover completes)", old.Addr())
	}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	clients := make([]*redis.Client, len(cands))
	for i, s := range cands {
		clients[i] = s.newClient(&redis.Options{MaxRetries: -1})
		defer clients[i].Close()
	}
	var promoted *Server
	var at time.Time
	for promoted == nil {
		for i, cl := range clients {
			info, err := cl.Info(ctx, "replication").Result()
			if err == nil && strings.Contains(info, "role:master") {
				promoted, at = cands[i], time.Now()
				break
			}
		}
		if promoted != nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("redistest: no replica of %s promoted within %v\n%s", old.Addr(), d, cands[0].logTail())
		}
		// Polling with a deadline: a promotion is announced nowhere a
		// test can await but INFO (or a gossip it cannot subscribe to).
		time.Sleep(10 * time.Millisecond)
	}
	c.waitAll(t, ctx, "cluster_state:ok after the failover", func(s *Server, cl *redis.Client) (bool, string) {
		if s == old {
			return true, "" // frozen by Stop: it answers nothing
		}
		info, err := cl.ClusterInfo(ctx).Result()
		return err == nil && strings.Contains(info, "cluster_state:ok"), fmt.Sprint(info, err)
	})
	return promoted, at
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
		if !s.alive() {
			continue
		}
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
		owner, err := slotOwner(ctx, cl, int64(slot))
		cl.Close()
		if err != nil {
			return fmt.Errorf("CLUSTER SHARDS on %s: %w", s.Addr(), err)
		}
		if owner == id {
			from = s
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
