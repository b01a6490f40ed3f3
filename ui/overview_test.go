package ui_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/timerq/timerq/internal/keyspace"
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

// TestOverviewShowsQuotas: the overview shows each quota read only, its
// limit ("unlimited" for 0), the usage and the percentage; when the usage
// cannot be read, "unknown" and the rest of the page, not a failure.
func TestOverviewShowsQuotas(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		e := newEnv(t, b, ui.Options{})
		if err := queue.SetQuotas(ctx, b.Client, e.q.Namespace(), queue.Quotas{Pending: 4, Endpoints: 0, Schedules: 7}); err != nil {
			t.Fatal(err)
		}
		schedule(t, e.q, "a", time.Hour, "")
		schedule(t, e.q, "b", time.Hour, "")
		// The queue read the quotas when it scheduled, after SetQuotas.
		_, body := e.Get(t, "/")
		for _, want := range []string{
			`<tr id="quota-pending"><td>Pending timers</td><td class="usage">2</td><td class="limit">4</td><td class="percent">50%</td></tr>`,
			`<tr id="quota-endpoints"><td>Endpoints</td><td class="usage">0</td><td class="limit">unlimited</td><td class="percent">—</td></tr>`,
			`<tr id="quota-schedules"><td>Schedules</td><td class="usage">0</td><td class="limit">7</td><td class="percent">0%</td></tr>`,
		} {
			if !strings.Contains(body, want) {
				t.Errorf("overview lacks %s:\n%s", want, body)
			}
		}
		if _, sec, _ := strings.Cut(body, "<h2>Quotas</h2>"); strings.Contains(sec[:strings.Index(sec, "<h2>")], "<form") {
			t.Errorf("the quotas section has a write action:\n%s", sec)
		}

		// A Redis that refuses the usage's HLEN (here WRONGTYPE; in
		// production an ACL without +hlen) leaves the page up.
		if err := b.Client.Set(ctx, keyspace.Namespace(e.q.Namespace()).Endpoints(), "x", 0).Err(); err != nil {
			t.Fatal(err)
		}
		resp, body := e.Get(t, "/")
		if resp.StatusCode != 200 || !strings.Contains(body, `id="quotas-unknown">unknown: `) ||
			!strings.Contains(body, `id="count-scheduled">2<`) {
			t.Errorf("overview when the usage cannot be read: %d\n%s", resp.StatusCode, body)
		}
	})
}
