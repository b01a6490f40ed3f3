package ctl_test

import (
	"context"
	"strings"
	"testing"

	"github.com/timerq/timerq/cmd/internal/ctl"
	"github.com/timerq/timerq/internal/redistest"
)

// TestOccurrenceIDsAreReservedForSchedules: `schedule x@<ms>` and an
// import line that would plant a timer with an occurrence's ID are
// refused, naming the rule and the line; an occurrence line is imported
// when its schedule comes in the same input (after it, as export writes
// them) or the namespace holds the schedule.
func TestOccurrenceIDsAreReservedForSchedules(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		c := newCLI(t, b)
		const occ = "x@1796238000000"
		r := c.run("schedule", occ, "--in", "1h")
		if r.code != ctl.ExitUsage || !strings.Contains(r.stderr, "reserved for occurrences of recurring schedules") ||
			!strings.Contains(r.stderr, `"x-1796238000000"`) {
			t.Fatalf("schedule %s: exit %d, stderr %q; want a usage error naming the rule and another ID", occ, r.code, r.stderr)
		}

		in := strings.Join([]string{
			`{"id":"plain","in":"1h"}`,
			`{"id":"` + occ + `","in":"1h"}`,
			`{"id":"` + occ + `","state":"scheduled","due_at":"2026-12-02T19:00:00Z","created_at":"2026-12-01T00:00:00Z","payload":""}`,
			`{"id":"fine","in":"1h"}`,
		}, "\n") + "\n"
		r = c.runCtx(ctx, in, "-o", "json", "import")
		if r.code == 0 || !strings.Contains(r.stdout, `"rejected_lines": [`) {
			t.Fatalf("import: exit %d, stdout %q; want lines 2 and 3 rejected", r.code, r.stdout)
		}
		got := decode[struct {
			Created           int   `json:"created"`
			Existing          int   `json:"existing"`
			Rejected          int   `json:"rejected"`
			RejectedLines     []int `json:"rejected_lines"`
			SchedulesCreated  int   `json:"schedules_created"`
			SchedulesExisting int   `json:"schedules_existing"`
			Quarantined       int   `json:"quarantined"`
		}](t, r.stdout)
		if got.Created != 2 || len(got.RejectedLines) != 2 || got.RejectedLines[0] != 2 || got.RejectedLines[1] != 3 {
			t.Fatalf("import: %+v; want 2 created, lines [2 3] rejected", got)
		}
		if !strings.Contains(r.stderr, "line 2: id \""+occ+"\" has the form <schedule ID>@<Unix ms>, which is reserved") ||
			!strings.Contains(r.stderr, "line 3: timer \""+occ+"\" is an occurrence of schedule \"x\"") ||
			!strings.Contains(r.stderr, "neither this input nor the namespace holds that schedule") {
			t.Fatalf("import stderr %q; want both lines named with the rule", r.stderr)
		}
		if r := c.run("get", occ); r.code != ctl.ExitNotFound {
			t.Fatalf("get %s after the import: exit %d; want nothing planted", occ, r.code)
		}

		// Once the namespace holds schedule x, its occurrence line imports.
		c.ok("schedule", "x", "--every", "1h")
		fired := `{"id":"` + occ + `","state":"fired","due_at":"2026-12-02T19:00:00Z","created_at":"2026-12-01T00:00:00Z","fired_at":"2026-12-02T19:00:00Z","payload":""}` + "\n"
		if r := c.runCtx(ctx, fired, "import"); r.code != 0 || !strings.Contains(r.stdout, "created 1, existing 0, rejected 0") {
			t.Fatalf("import of an occurrence of an existing schedule: exit %d, %q, %q", r.code, r.stdout, r.stderr)
		}
	})
}
