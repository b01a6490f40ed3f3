package redistest

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"
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
