package ui_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/internal/uitest"
	"github.com/timerq/timerq/queue"
	"github.com/timerq/timerq/ui"
)

// TestOverviewSaysWhoServesTheNamespace: the overview shows how many
// workers serve the namespace and says why timers are overdue when none
// does; one failing shard leaves the others' figures, that shard marked.
func TestOverviewSaysWhoServesTheNamespace(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		e := newEnv(t, b, ui.Options{})
		schedule(t, e.q, "late", -time.Hour, "")
		_, body := e.Get(t, "/")
		if !strings.Contains(body, `id="count-workers">0<`) || !strings.Contains(body, "never seen") ||
			!strings.Contains(body, `id="no-worker">1 timers are due and no worker serves this namespace`) {
			t.Errorf("overview without a worker:\n%s", body)
		}
		if _, err := e.q.Engine().Heartbeat(ctx, "w-1", time.Minute, false); err != nil {
			t.Fatal(err)
		}
		_, body = e.Get(t, "/")
		if !strings.Contains(body, `id="count-workers">1<`) || strings.Contains(body, `id="no-worker"`) {
			t.Errorf("overview with a worker:\n%s", body)
		}

		ns := redistest.Namespace(t)
		if _, err := queue.CreateNamespace(ctx, b.Client, ns, 4); err != nil {
			t.Fatal(err)
		}
		q, err := queue.New(b.Client, queue.Options{Namespace: ns})
		if err != nil {
			t.Fatal(err)
		}
		defer q.Close()
		schedule(t, q, "a", time.Hour, "")
		broken := 1
		if k, _ := q.Inspect().ShardOf(ctx, "a"); k == broken {
			broken = 2
		}
		if err := b.Client.Set(ctx, q.Keys().Shard(broken)[0], "x", 0).Err(); err != nil {
			t.Fatal(err)
		}
		h, err := ui.New(q, ui.Options{})
		if err != nil {
			t.Fatal(err)
		}
		resp, body := uitest.Serve(t, h, "").Get(t, "/")
		if resp.StatusCode != 200 || !strings.Contains(body, `id="count-scheduled">1<`) ||
			!strings.Contains(body, `<tr id="shard-`+string(rune('0'+broken))+`" class="failed">`) {
			t.Errorf("overview with a failing shard %d: %d\n%s", broken, resp.StatusCode, body)
		}
	})
}
