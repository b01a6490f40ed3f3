package ui_test

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/queue"
	"github.com/timerq/timerq/ui"
)

// TestConsumersPage: the groups page lists each group's consumers with
// their pending count and when they were last seen, shows when the
// group's newest delivery fired rather than its raw stream entry ID, and
// the group's lag, or "unknown" where the server does not track it.
func TestConsumersPage(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		e := newEnv(t, b, ui.Options{})
		cctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		got := make(chan string, 1)
		go func() {
			done <- e.q.Consume(cctx, "billing", "worker-7", func(_ context.Context, ev queue.Event) error {
				got <- ev.ID
				return nil
			}, queue.ConsumeOptions{Block: 20 * time.Millisecond})
		}()
		defer func() { cancel(); <-done }()
		schedule(t, e.q, "c-1", -time.Second, "")
		if res, err := e.q.Engine().Claim(ctx, 10); err != nil || len(res.Fired) != 1 {
			t.Fatalf("claim: %+v %v", res, err)
		}
		select {
		case <-got:
		case <-time.After(10 * time.Second):
			t.Fatal("the consumer got no entry")
		}
		var gs []queue.GroupInfo
		redistest.Eventually(t, 5*time.Second, "the delivery acknowledged", func() bool {
			gs, _ = e.q.Inspect().Groups(ctx)
			return len(gs) == 1 && gs[0].Pending == 0
		})
		resp, body := e.Get(t, "/groups")
		if resp.StatusCode != 200 {
			t.Fatalf("GET /groups = %d\n%s", resp.StatusCode, body)
		}
		row := regexp.MustCompile(`(?s)<tr[^>]*><td>billing</td><td class="id">worker-7</td><td>0</td>\s*<td>(.*?)</td>\s*<td>(.*?)</td>\s*<td class="status">(.*?)</td>`).FindStringSubmatch(body)
		if row == nil {
			t.Fatalf("no consumer row for billing/worker-7:\n%s", body)
		}
		if b.Mini == nil {
			// miniredis does not track idle times; real Redis decides.
			if !strings.Contains(row[1], "ago") && !strings.Contains(row[1], "now") || row[3] == "" || strings.Contains(row[3], "unknown") {
				t.Errorf("consumer row shows no last-seen time or status: %q", row)
			}
		}
		// The group's lag: a number where the server tracks what the group
		// read (Redis 7), "unknown" where it does not (miniredis, as
		// timerworker --dev embeds it), never the whole stream.
		lag := regexp.MustCompile(`<tr><td>billing</td><td>1</td><td>0</td><td>([^<]*)</td>`).FindStringSubmatch(body)
		want := "0"
		if b.Mini != nil {
			want = "unknown"
		}
		if lag == nil || lag[1] != want {
			t.Errorf("the group's lag shows %q, want %q:\n%s", lag, want, body)
		}
		id := gs[0].LastDeliveredID
		if strings.Contains(body, "<code>"+id+"</code>") || !strings.Contains(body, `title="stream entry `+id+`"`) {
			t.Errorf("last delivered shows the raw ID %s rather than a time:\n%s", id, body)
		}
	})
}
