package cliconf_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/timerq/timerq/cmd/internal/ctl"
	"github.com/timerq/timerq/internal/errtext"
	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/queue"
)

// timerctl runs timerctl in-process and returns its exit code and stderr.
func timerctl(args ...string) (int, string) {
	var out, errOut bytes.Buffer
	code := ctl.Run(context.Background(), append([]string{"timerctl", "--timeout", "3s"}, args...), ctl.Options{Stdout: &out, Stderr: &errOut})
	return code, errOut.String()
}

// TestEachFailureGetsItsOwnHint: every exit-1 failure of timerctl ends in
// a fix for its cause, given once, and only an unreachable Redis is told to check that
// Redis is reachable.
func TestEachFailureGetsItsOwnHint(t *testing.T) {
	srv := redistest.Start(t, redistest.Config{})
	rdb := srv.Client(t)
	ctx := context.Background()
	ns := redistest.Namespace(t)
	// WRONGTYPE: something else wrote a namespace key.
	if err := rdb.Set(ctx, "timerq:{wrongtype}:due", "x", 0).Err(); err != nil {
		t.Fatal(err)
	}
	// A malformed record.
	if err := rdb.HSet(ctx, "timerq:{"+ns+"}:timers", "bad", "garbage").Err(); err != nil {
		t.Fatal(err)
	}
	// NOPERM: a user without HSET.
	if err := rdb.Do(ctx, "ACL", "SETUSER", "nohset", "reset", "on", ">pw", "~*", "&*", "+@all", "-hset").Err(); err != nil {
		t.Fatal(err)
	}
	// OOM: a server at maxmemory with noeviction.
	full := redistest.Start(t, redistest.Config{Args: []string{"--maxmemory", "1", "--maxmemory-policy", "noeviction"}})
	// MOVED: a Cluster node addressed as a single server.
	cl := redistest.StartCluster(t, 3, nil)
	movedNS := ""
	for i := 0; movedNS == ""; i++ {
		n := fmt.Sprintf("ns%d", i)
		if slot := cl.Nodes[0].Client(t).ClusterKeySlot(ctx, "timerq:{"+n+"}:due").Val(); slot >= 16384/3 {
			movedNS = n
		}
	}

	cases := []struct {
		name string
		args []string
		want string
	}{
		{"unreachable", []string{"--redis", "redis://" + closedAddr(t) + "/0", "get", "a"}, "check that Redis is reachable"},
		{"wrong type", []string{"--redis", srv.URL(), "-n", "wrongtype", "schedule", "a", "--in", "1m"}, "another program writes under timerq:{wrongtype}:*: use another --namespace, or remove those keys"},
		{"malformed record", []string{"--redis", srv.URL(), "-n", ns, "get", "bad"}, "something other than timerq wrote that timer's field"},
		{"no permission", []string{"--redis", "redis://nohset:pw@" + srv.Addr() + "/0", "-n", ns, "schedule", "a", "--in", "1m"}, "docs/security.md"},
		{"out of memory", []string{"--redis", full.URL(), "schedule", "a", "--in", "1m"}, "Redis is at maxmemory with the noeviction policy: raise maxmemory"},
		{"moved", []string{"--redis", cl.Nodes[0].URL(), "-n", movedNS, "schedule", "a", "--in", "1m"}, "add ?cluster=1 to --redis"},
		{"cluster URL", []string{"--redis", cl.URL(), "-n", movedNS, "schedule", "a", "--in", "1m"}, ""},
	}
	for _, tc := range cases {
		code, stderr := timerctl(tc.args...)
		if tc.want == "" {
			if code != 0 {
				t.Errorf("%s: exit %d %q, want 0", tc.name, code, stderr)
			}
			continue
		}
		if code != 1 || !strings.Contains(stderr, tc.want) || strings.Count(stderr, "\n") != 1 {
			t.Errorf("%s: exit %d %q, want 1 and one line with %q", tc.name, code, stderr, tc.want)
		}
		if h := errtext.RepeatedHint(stderr); h != "" {
			t.Errorf("%s: %q gives %q twice", tc.name, stderr, h)
		}
		if reach := strings.Contains(stderr, "check that Redis is reachable"); reach != (tc.name == "unreachable") {
			t.Errorf("%s: %q: 'check that Redis is reachable' fits only an unreachable Redis", tc.name, stderr)
		}
		if tc.name == "out of memory" && strings.Contains(stderr, "cancel timers") {
			t.Errorf("%s: %q advises cancelling, which is refused under OOM too", tc.name, stderr)
		}
		if strings.Contains(stderr, "Options.") {
			t.Errorf("%s: %q names a Go option on the command line", tc.name, stderr)
		}
	}
	// Nothing was written by the refused schedules.
	if n := full.Client(t).DBSize(ctx).Val(); n != 0 {
		t.Errorf("OOM schedule wrote %d keys", n)
	}
	q, err := queue.New(rdb, queue.Options{Namespace: "wrongtype"})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	if _, err := q.Get(ctx, "a"); err == nil {
		t.Error("the WRONGTYPE schedule wrote the timer")
	}
}
