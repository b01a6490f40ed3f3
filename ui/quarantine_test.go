package ui_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/ui"
)

// TestQuarantinePage: a record planted by hand and quarantined by a claim
// shows on the quarantine page, reached from every page's navigation, with
// its bytes as escaped text; the timers page still renders beside it.
func TestQuarantinePage(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		e := newEnv(t, b, ui.Options{})
		_, body := e.Get(t, "/quarantine")
		if !strings.Contains(body, "The quarantine is empty") {
			t.Fatalf("empty quarantine page:\n%s", body)
		}
		schedule(t, e.q, "valid", -time.Second, "v")
		k := e.q.Keys().Shard(0)
		const raw = "<script>alert(1)</script>\x00\xff"
		if err := b.Client.HSet(ctx, k[1], "poison", raw).Err(); err != nil {
			t.Fatal(err)
		}
		if err := b.Client.ZAdd(ctx, k[0], redis.Z{Score: float64(time.Now().Add(-time.Minute).UnixMilli()), Member: "poison"}).Err(); err != nil {
			t.Fatal(err)
		}
		if resp, body := e.Get(t, "/timers"); resp.StatusCode != 200 || !strings.Contains(body, "valid") {
			t.Fatalf("timers page with a malformed record: %d\n%s", resp.StatusCode, body)
		}
		if res, err := e.q.Engine().Claim(ctx, 10); err != nil || len(res.Fired) != 1 || len(res.Quarantined) != 1 {
			t.Fatalf("claim: %+v, %v", res, err)
		}
		resp, body := e.Get(t, "/quarantine")
		if resp.StatusCode != 200 {
			t.Fatalf("GET /quarantine = %d\n%s", resp.StatusCode, body)
		}
		for _, want := range []string{"Quarantine <span class=\"muted\">(1)</span>", "<code>poison</code>", "malformed record",
			`&lt;script&gt;alert(1)&lt;/script&gt;\x00\xff`, "(27 bytes)", `class="active">Quarantine</a>`} {
			if !strings.Contains(body, want) {
				t.Errorf("quarantine page lacks %q:\n%s", want, body)
			}
		}
		if strings.Contains(body, "<script>alert") {
			t.Error("the quarantine page renders markup from a record")
		}
		if _, body := e.Get(t, "/"); !strings.Contains(body, `href="/quarantine"`) {
			t.Error("the overview has no link to the quarantine page")
		}
	})
}
