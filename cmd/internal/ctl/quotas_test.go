package ctl_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/queue"
)

// TestNamespaceQuotas: 'namespace quotas' prints the defaults, sets the
// quotas given and keeps the others; a schedule past the pending quota
// exits 4 naming the quota and the command that raises it; stats shows
// the usage against each quota, in text and JSON.
func TestNamespaceQuotas(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		c := newCLI(t, b)
		r := c.ok("namespace", "quotas")
		if got := squeeze(r.stdout); got != "\npending 1000000\nendpoints 100\nschedules 10000\n" {
			t.Fatalf("default quotas:\n%s", r.stdout)
		}
		r = c.ok("namespace", "quotas", "--pending", "1", "--schedules", "0")
		if got := squeeze(r.stdout); got != "\npending 1\nendpoints 100\nschedules unlimited\n" {
			t.Fatalf("after setting two:\n%s", r.stdout)
		}
		if r := c.run("namespace", "quotas", "--pending", "-3"); r.code != 2 {
			t.Fatalf("a negative quota: exit %d %q, want 2", r.code, r.stderr)
		}

		c.ok("schedule", "a", "--at", time.Now().Add(time.Hour).UTC().Format(time.RFC3339))
		r = c.run("schedule", "b", "--at", time.Now().Add(time.Hour).UTC().Format(time.RFC3339))
		if r.code != 4 || !strings.Contains(r.stderr, "pending quota") || !strings.Contains(r.stderr, "timerctl namespace quotas --pending N") {
			t.Fatalf("a schedule past the quota: exit %d %q, want 4 naming the quota and the fix", r.code, r.stderr)
		}
		if _, err := c.q.Get(t.Context(), "b"); err == nil {
			t.Fatal("the refused timer was written")
		}

		r = c.ok("stats")
		if !strings.Contains(squeeze(r.stdout), "\nquotas pending 1 of 1 (100%), endpoints 0 of 100 (0%), schedules 0 (unlimited)\n") {
			t.Fatalf("stats does not show the quotas' usage:\n%s", r.stdout)
		}
		var js struct {
			Quotas map[string]struct {
				Limit int64 `json:"limit"`
				Usage int64 `json:"usage"`
			} `json:"quotas"`
		}
		if err := json.Unmarshal([]byte(c.ok("-o", "json", "stats").stdout), &js); err != nil {
			t.Fatal(err)
		}
		if p := js.Quotas[queue.QuotaPending]; p.Limit != 1 || p.Usage != 1 || js.Quotas[queue.QuotaEndpoints].Limit != 100 {
			t.Fatalf("json quotas = %+v", js.Quotas)
		}
	})
}
