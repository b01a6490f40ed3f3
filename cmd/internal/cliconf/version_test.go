package cliconf_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/timerq/timerq/cmd/internal/cliconf"
	"github.com/timerq/timerq/internal/redistest"
)

// fakeInfo answers INFO with a server section of the given version.
type fakeInfo struct{ version string }

func (fakeInfo) DialHook(next redis.DialHook) redis.DialHook { return next }
func (f fakeInfo) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() == "info" {
			cmd.(*redis.StringCmd).SetVal("# Server\r\nredis_version:" + f.version + "\r\nredis_mode:standalone\r\n")
			return nil
		}
		return next(ctx, cmd)
	}
}
func (fakeInfo) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestCheckServerRefusesOldRedis: the start-up check reads INFO server and
// refuses a server older than a feature needs, naming both versions.
func TestCheckServerRefusesOldRedis(t *testing.T) {
	srv := redistest.Start(t, redistest.Config{})
	ctx := context.Background()
	for _, tc := range []struct {
		version string
		need    cliconf.Requirement
		want    string // "" = accepted
	}{
		{"4.0.14", cliconf.NeedCore, "version 4.0.14, too old: timerq (streams and Lua scripts) needs Redis 5.0 or later"},
		{"5.0.0", cliconf.NeedCore, ""},
		{"6.0.9", cliconf.NeedConsume, "Consume (XAUTOCLAIM) needs Redis 6.2"},
		{"6.2.0", cliconf.NeedConsume, ""},
		{"6.2.14", cliconf.NeedShardedPubSub, "needs Redis 7.0"},
		{"7.2.4", cliconf.NeedShardedPubSub, ""}, // Valkey 8
		{"10.0.1", cliconf.NeedShardedPubSub, ""},
	} {
		c := srv.Client(t)
		c.AddHook(fakeInfo{tc.version})
		err := cliconf.CheckServer(ctx, c, "redis://x", tc.need)
		var e *cliconf.Error
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s for %s: %v, want accepted", tc.version, tc.need, err)
		case tc.want != "" && (!errors.As(err, &e) || !strings.Contains(e.Error(), tc.want) || e.ExitCode() != cliconf.ExitFailure ||
			!strings.Contains(e.Fix, "upgrade Redis")):
			t.Errorf("%s for %s: %v, want exit 1 and %q", tc.version, tc.need, err, tc.want)
		}
	}
	// The real server passes, and so does one that hides its version.
	if err := cliconf.CheckServer(ctx, srv.Client(t), "", cliconf.NeedCore, cliconf.NeedConsume, cliconf.NeedShardedPubSub); err != nil {
		t.Errorf("redis-server on PATH: %v", err)
	}
	m, mc := redistest.Mini(t)
	_ = m
	if err := cliconf.CheckServer(ctx, mc, "", cliconf.NeedCore); err != nil {
		t.Errorf("miniredis (no version): %v", err)
	}
	// A Cluster node through a single-server client: refused with the
	// ?cluster=1 hint; through a Cluster client: accepted.
	cl := redistest.StartCluster(t, 3, nil)
	err := cliconf.CheckServer(ctx, cl.Nodes[0].Client(t), "redis://node", cliconf.NeedCore)
	if err == nil || !strings.Contains(err.Error(), "add ?cluster=1 to --redis") {
		t.Errorf("Cluster node as a single server: %v", err)
	}
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{cl.Nodes[0].Addr()}})
	defer cc.Close()
	if err := cliconf.CheckServer(ctx, cc, "", cliconf.NeedCore); err != nil {
		t.Errorf("Cluster client: %v", err)
	}
	// Unreachable: the error comes back for Explain, not as a version.
	dead := redis.NewClient(&redis.Options{Addr: closedAddr(t), MaxRetries: -1})
	defer dead.Close()
	if err := cliconf.CheckServer(ctx, dead, "", cliconf.NeedCore); err == nil || strings.Contains(err.Error(), "too old") {
		t.Errorf("unreachable: %v", err)
	}
}

func closedAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}
