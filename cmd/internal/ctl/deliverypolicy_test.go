package ctl_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/timerq/timerq/cmd/internal/ctl"
	"github.com/timerq/timerq/deliver"
	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/queue"
)

// timerctl delivery-policy shows the namespace's policy and sets it;
// schedule --deliver-url is refused with the fix while timer URLs are off
// (nothing written), without --deliver, and for a URL with user
// information; once allowed, the timer and a recurring schedule are
// created with their URL.
func TestDeliveryPolicyAndTimerURL(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		c := newCLI(t, b)
		ctx := context.Background()
		if _, err := c.q.Endpoints().Put(ctx, queue.Endpoint{Name: "billing", URL: "https://example.com/billing",
			Secrets: []queue.Secret{queue.Secret(deliver.GenerateSecret())}}, nil); err != nil {
			t.Fatal(err)
		}
		if out := c.ok("delivery-policy").stdout; !strings.Contains(out, "allow-timer-urls  false") {
			t.Errorf("default policy:\n%s", out)
		}
		const target = "https://hooks.example.com/tenant/7"
		r := c.run("schedule", "t1", "--in", "1h", "--deliver", "billing", "--deliver-url", target)
		if r.code == 0 || !strings.Contains(r.stderr, "does not allow timer URLs") || !strings.Contains(r.stderr, "delivery-policy --allow-timer-urls=true") {
			t.Errorf("a timer URL while they are off: exit %d\n%s", r.code, r.stderr)
		}
		if _, err := c.q.Get(ctx, "t1"); !errors.Is(err, queue.ErrNotFound) {
			t.Errorf("the refused timer: Get = %v", err)
		}
		if r := c.run("schedule", "t1", "--in", "1h", "--deliver-url", target); r.code != ctl.ExitUsage {
			t.Errorf("--deliver-url without --deliver: exit %d %s", r.code, r.stderr)
		}
		if out := c.ok("delivery-policy", "--allow-timer-urls=true").stdout; !strings.Contains(out, "allow-timer-urls  true") {
			t.Errorf("set policy:\n%s", out)
		}
		if r := c.run("schedule", "t1", "--in", "1h", "--deliver", "billing", "--deliver-url", "https://u:p@hooks.example.com/"); r.code == 0 ||
			!strings.Contains(r.stderr, "user information") {
			t.Errorf("a URL with user information: exit %d %s", r.code, r.stderr)
		}
		c.ok("schedule", "t1", "--in", "1h", "--deliver", "billing", "--deliver-url", target)
		c.ok("schedule", "tick", "--every", "1h", "--deliver", "billing", "--deliver-url", target)
		info, err := c.q.Recurring().Get(ctx, "tick")
		if err != nil || info.URL != target {
			t.Errorf("GetRecurring = %+v, %v", info, err)
		}
		if p, err := c.q.Deliveries().Policy(ctx); err != nil || !p.AllowTimerURLs {
			t.Errorf("stored policy %+v, %v", p, err)
		}
		if out := c.ok("-o", "json", "delivery-policy", "--allow-timer-urls=false").stdout; !strings.Contains(out, `"allow_timer_urls": false`) &&
			!strings.Contains(out, `"allow_timer_urls":false`) {
			t.Errorf("json:\n%s", out)
		}
	})
}
