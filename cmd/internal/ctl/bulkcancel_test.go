package ctl_test

import (
	"strings"
	"testing"

	"github.com/timerq/timerq/api"
	"github.com/timerq/timerq/cmd/internal/ctl"
	"github.com/timerq/timerq/internal/redistest"
)

// TestCancelPrefixAndJobs: cancel --prefix cancels the timers of a prefix
// and prints the job, which cancel-jobs get and list read back; misuse is
// a usage error that writes nothing, an unknown job exit 3.
func TestCancelPrefixAndJobs(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		c := newCLI(t, b)
		for _, args := range [][]string{
			{"cancel", "--prefix", ""}, {"cancel", "a", "--prefix", "wf/"},
		} {
			if r := c.run(args...); r.code != ctl.ExitUsage || r.stdout != "" || strings.Count(r.stderr, ": ") < 2 {
				t.Errorf("%q: exit %d, stdout %q, stderr %q; want %d saying what to do", args, r.code, r.stdout, r.stderr, ctl.ExitUsage)
			}
		}
		if keys := c.keys(); len(keys) != 0 {
			t.Fatalf("refused commands wrote keys: %v", keys)
		}

		c.ok("schedule", "wf/1", "--in", "1h")
		c.ok("schedule", "wf/2", "--in", "1h")
		c.ok("schedule", "wf", "--in", "1h")
		c.ok("cancel", "wf/2")
		j := decode[api.CancelJobJSON](t, c.ok("-o", "json", "cancel", "--prefix", "wf/").stdout)
		if j.State != "done" || j.Counts != (api.CancelCountsJSON{Cancelled: 1, AlreadyCancelled: 1}) || j.Filter.IDPrefix != "wf/" {
			t.Fatalf("cancel --prefix: %+v", j)
		}
		if got := decode[timerJSON](t, c.ok("-o", "json", "get", "wf").stdout); got.State != "scheduled" {
			t.Fatalf("wf is %s, want it left scheduled", got.State)
		}
		if got := decode[api.CancelJobJSON](t, c.ok("-o", "json", "cancel-jobs", "get", j.ID).stdout); got.ID != j.ID || got.Counts != j.Counts {
			t.Fatalf("cancel-jobs get: %+v, want %+v", got, j)
		}
		list := decode[[]api.CancelJobJSON](t, c.ok("-o", "json", "cancel-jobs", "list").stdout)
		if len(list) != 1 || list[0].ID != j.ID {
			t.Fatalf("cancel-jobs list: %+v", list)
		}
		if out := c.ok("cancel-jobs", "list").stdout; !strings.Contains(out, j.ID) || !strings.Contains(out, `"wf/"`) {
			t.Fatalf("cancel-jobs list table:\n%s", out)
		}
		if out := c.ok("cancel", "--prefix", "wf/").stdout; !strings.Contains(out, "cancelled before  2") {
			t.Fatalf("second cancel --prefix table:\n%s", out)
		}
		if r := c.run("cancel-jobs", "get", "nope"); r.code != ctl.ExitNotFound || !strings.Contains(r.stderr, "cancel-jobs list") {
			t.Fatalf("cancel-jobs get nope: exit %d %q, want %d", r.code, r.stderr, ctl.ExitNotFound)
		}
	})
}
