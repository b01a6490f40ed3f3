package ctl_test

import (
	"context"
	"maps"
	"strings"
	"testing"

	"github.com/timerq/timerq/internal/redistest"
)

// TestScheduleOwnerRoundTrips: a recurring schedule takes --owner and
// --label for its occurrences, schedules export writes them, and
// schedules import restores them.
func TestScheduleOwnerRoundTrips(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		c := newCLI(t, b)
		labels := map[string]string{"team": "billing"}
		c.ok("schedule", "s1", "--every", "1h", "--owner", "wf-1", "--label", "team=billing")
		check := func(when string) {
			t.Helper()
			in, err := c.q.Recurring().Get(ctx, "s1")
			if err != nil || in.Owner != "wf-1" || !maps.Equal(in.Labels, labels) {
				t.Fatalf("%s: schedule s1 owner %q labels %v, %v", when, in.Owner, in.Labels, err)
			}
		}
		check("created")
		out := c.ok("schedules", "export").stdout
		if !strings.Contains(out, `"owner":"wf-1"`) || !strings.Contains(out, `"labels":{"team":"billing"}`) {
			t.Fatalf("schedules export lacks the owner or labels:\n%s", out)
		}
		c.ok("schedules", "delete", "s1")
		if r := c.runCtx(ctx, out, "schedules", "import"); r.code != 0 {
			t.Fatalf("schedules import: exit %d, stderr %q", r.code, r.stderr)
		}
		check("imported")
	})
}
