package ctl_test

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/internal/uitest"
	"github.com/timerq/timerq/ui"
)

// TestDashboardTimesPasteIntoTimerctl: a due time as the dashboard prints
// it, pasted into timerctl, names the same millisecond; and a payload the
// dashboard previews as binary, timerctl previews alike.
func TestDashboardTimesPasteIntoTimerctl(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		c := newCLI(t, b)
		due := time.Now().Add(90 * time.Minute).UTC().Truncate(time.Millisecond).Add(26 * time.Millisecond)
		if _, err := c.q.Schedule(context.Background(), "src", due, []byte{0, 1, 2, 0xff}); err != nil {
			t.Fatal(err)
		}
		h, err := ui.New(c.q, ui.Options{})
		if err != nil {
			t.Fatal(err)
		}
		dash := uitest.Serve(t, h, "")
		_, page := dash.Get(t, "/timer?id=src")
		m := regexp.MustCompile(`<th>Due</th><td>([^ <]+)`).FindStringSubmatch(page)
		if m == nil {
			t.Fatalf("no due time on the timer page:\n%s", page)
		}
		printed := m[1]
		c.ok("schedule", "dst", "--at", printed)
		got := decode[timerJSON](t, c.ok("-o", "json", "get", "dst").stdout)
		if got.DueAt != printed || !mustTime(t, got.DueAt).Equal(due) {
			t.Errorf("the dashboard printed %q for %v; timerctl read it as %s", printed, due, got.DueAt)
		}

		_, list := dash.Get(t, "/timers")
		cell := regexp.MustCompile(`<td class="payload">([^<]*)</td>`).FindStringSubmatch(list)
		if cell == nil || !strings.Contains(c.ok("get", "src").stdout, strings.ReplaceAll(strings.ReplaceAll(cell[1], "&lt;", "<"), "&gt;", ">")) {
			t.Errorf("the dashboard's payload cell %v is not what timerctl prints:\n%s", cell, c.ok("get", "src").stdout)
		}
	})
}
