package ctl_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/timerq/timerq/cmd/internal/ctl"
	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/queue"
)

// TestFlowCommands puts, lists and deletes flow policies, refuses a bad
// one before writing anything, and shows a group's parked keys with their
// backlog, in-flight count and rate.
func TestFlowCommands(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		c := newCLI(t, b)
		for _, bad := range [][]string{
			{"flow", "put", "--rate", "0"},
			{"flow", "put", "--rate", "-3", "--per", "1s"},
			{"flow", "put", "--rate", "5", "--per", "8760h"},
		} {
			if r := c.run(bad...); r.code != ctl.ExitUsage || !strings.Contains(r.stderr, "flow policy") {
				t.Fatalf("timerctl %q: exit %d, stderr %q; want a usage error about the policy", bad, r.code, r.stderr)
			}
		}
		if ps, err := c.q.Flows().Policies(ctx); err != nil || len(ps) != 0 {
			t.Fatalf("refused policies wrote %v, %v", ps, err)
		}
		r := c.ok("flow", "put", "--key", "acme", "--rate", "100", "--per", "1m", "--max-in-flight", "1")
		if !strings.Contains(r.stdout, `key "acme": 100 per 1m0s, at most 1 in flight`) {
			t.Fatalf("put said %q", r.stdout)
		}
		c.ok("flow", "put", "--rate", "10", "--per", "1s")
		r = c.ok("flow", "list")
		if !strings.Contains(r.stdout, "(default)") || !strings.Contains(r.stdout, "acme") {
			t.Fatalf("list said %q", r.stdout)
		}
		var batch []queue.NewTimer
		for _, id := range []string{"a1", "a2", "a3"} {
			batch = append(batch, queue.NewTimer{ID: id, Due: time.Now().Add(-time.Second), FlowKey: "acme"})
		}
		if _, err := c.q.ScheduleBatch(ctx, batch); err != nil {
			t.Fatal(err)
		}
		if res, err := c.q.Engine().Claim(ctx, 10); err != nil || len(res.Fired) != 3 {
			t.Fatalf("Claim = %v, %v", res, err)
		}
		if ds, err := c.q.Lease(ctx, "timerq-deliver", "d1", queue.LeaseOptions{Count: 10}); err != nil || len(ds) != 1 {
			t.Fatalf("Lease = %d, %v; want 1, the key's bound", len(ds), err)
		}
		r = c.ok("schedule", "a4", "--in", "1h", "--flow-key", "acme")
		if r := c.run("schedule", "a5", "--in", "1h", "--flow-key", "bad\x01key"); r.code != ctl.ExitUsage {
			t.Fatalf("a bad --flow-key: exit %d, stderr %q", r.code, r.stderr)
		}
		// A recurring schedule takes --flow-key for its occurrences,
		// schedules export writes it,
		c.ok("schedule", "s1", "--every", "1h", "--flow-key", "acme")
		if in, err := c.q.Recurring().Get(ctx, "s1"); err != nil || in.FlowKey != "acme" {
			t.Fatalf("schedule s1: flow key %q, %v; want acme", in.FlowKey, err)
		}
		out := c.ok("schedules", "export").stdout
		if !strings.Contains(out, `"flow_key":"acme"`) {
			t.Fatalf("schedules export lacks the flow key:\n%s", out)
		}
		// and schedules import restores it.
		c.ok("schedules", "delete", "s1")
		if r := c.runCtx(ctx, out, "schedules", "import"); r.code != 0 {
			t.Fatalf("schedules import: exit %d, stderr %q", r.code, r.stderr)
		}
		if in, err := c.q.Recurring().Get(ctx, "s1"); err != nil || in.FlowKey != "acme" {
			t.Fatalf("imported s1: flow key %q, %v; want acme", in.FlowKey, err)
		}
		if r := c.run("schedule", "s2", "--every", "1h", "--flow-key", "bad\x01key"); r.code != ctl.ExitUsage {
			t.Fatalf("a bad recurring --flow-key: exit %d, stderr %q", r.code, r.stderr)
		}
		r = c.ok("flow", "stats")
		if !strings.Contains(r.stdout, "BACKLOG") || !regexpLine(r.stdout, "acme", "2", "1", "100 per 1m0s") {
			t.Fatalf("stats said %q", r.stdout)
		}
		c.ok("flow", "delete", "--key", "acme")
		if r := c.run("flow", "delete", "--key", "acme"); r.code != ctl.ExitNotFound {
			t.Fatalf("deleting again: exit %d, stderr %q", r.code, r.stderr)
		}
	})
}

// regexpLine reports whether some line of out holds each of words, in order.
func regexpLine(out string, words ...string) bool {
	for _, line := range strings.Split(out, "\n") {
		rest, ok := line, true
		for _, w := range words {
			i := strings.Index(rest, w)
			if i < 0 {
				ok = false
				break
			}
			rest = rest[i+len(w):]
		}
		if ok {
			return true
		}
	}
	return false
}
