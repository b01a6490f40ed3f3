package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/timerq/timerq/api"
	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/queue"
)

// A timer URL of its own (deliver.url) is a namespace policy, off by
// default: while it is off a timer, a batch item and a schedule that give
// one are refused with 422 timer-urls-off at /deliver/url and nothing is
// written; a URL that is not http(s), has user information, or is a
// private address literal the server does not allow is refused with 422
// at /deliver/url whatever the policy; once the policy allows them (PUT
// .../delivery-policy), the timer is created and its fire event carries
// the URL beside the endpoint's name, and a schedule shows it.
func TestTimerURLPolicy(t *testing.T) {
	redistest.ForEachAll(t, func(t *testing.T, b *redistest.Backend) {
		e := newEnv(t, b, api.Options{EndpointAllow: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}})
		ctx := context.Background()
		if r := e.do(ctx, "PUT", e.url("/endpoints/billing"), billingBody()); r.Status != http.StatusCreated {
			t.Fatalf("put endpoint = %d %s", r.Status, r.Body)
		}
		policy := func(r resp) api.DeliveryPolicyJSON {
			t.Helper()
			var p api.DeliveryPolicyJSON
			if r.Status != http.StatusOK || json.Unmarshal(r.Body, &p) != nil {
				t.Fatalf("delivery policy = %d %s", r.Status, r.Body)
			}
			return p
		}
		if p := policy(e.do(ctx, "GET", e.url("/delivery-policy"), nil)); p.AllowTimerURLs {
			t.Fatal("timer URLs are allowed by default")
		}
		past := time.Now().Add(-time.Minute).UTC().Format(time.RFC3339)
		own := func(id, url string) map[string]any {
			return map[string]any{"id": id, "due_at": past, "payload_text": "{}", "deliver": map[string]any{"endpoint": "billing", "url": url}}
		}
		const target = "https://hooks.example.com/tenant/7"
		before := e.snapshot()
		for _, c := range []struct {
			name, method, path string
			body               map[string]any
			field              string
		}{
			{"timer", "POST", "/timers", own("t1", target), "/deliver/url"},
			{"batch item", "POST", "/timers/batch", map[string]any{"timers": []map[string]any{{"id": "a", "in": "1h"}, own("b", target)}}, "/timers/1/deliver/url"},
			{"schedule", "POST", "/schedules", map[string]any{"id": "tick", "every": "1h", "deliver": map[string]any{"endpoint": "billing", "url": target}}, "/deliver/url"},
		} {
			r := e.do(ctx, c.method, e.url(c.path), c.body)
			if p := r.problem(t); r.Status != http.StatusUnprocessableEntity || p.Type != api.ProblemTypePrefix+api.SlugTimerURLsOff ||
				p.Field != c.field || !strings.Contains(p.Detail, "delivery policy") {
				t.Errorf("%s with a URL while the policy is off = %d %s; want 422 timer-urls-off at %s", c.name, r.Status, r.Body, c.field)
			}
		}
		for _, c := range []struct{ name, url, want string }{
			{"ftp", "ftp://hooks.example.com/", "scheme"},
			{"userinfo", "https://u:p@hooks.example.com/", "user information"},
			{"private", "http://10.1.2.3/hook", "10.0.0.0/8"},
			{"metadata", "http://169.254.169.254/", "169.254"},
		} {
			r := e.do(ctx, "POST", e.url("/timers"), own("t1", c.url))
			if p := r.problem(t); r.Status != http.StatusUnprocessableEntity || p.Field != "/deliver/url" || !strings.Contains(p.Detail, c.want) {
				t.Errorf("%s URL = %d %s; want 422 at /deliver/url saying %q", c.name, r.Status, r.Body, c.want)
			}
		}
		if after := e.snapshot(); after != before {
			t.Fatalf("refused creates wrote:\n%s", after)
		}
		for _, id := range []string{"t1", "a", "b"} {
			if _, err := e.q.Get(ctx, id); !errors.Is(err, queue.ErrNotFound) {
				t.Fatalf("refused timer %s: Get = %v, want ErrNotFound", id, err)
			}
		}
		if _, err := e.q.Recurring().Get(ctx, "tick"); !errors.Is(err, queue.ErrRecurringNotFound) {
			t.Fatalf("refused schedule: GetRecurring = %v", err)
		}

		if p := policy(e.do(ctx, "PUT", e.url("/delivery-policy"), map[string]any{"allow_timer_urls": true})); !p.AllowTimerURLs {
			t.Fatal("PUT did not allow timer URLs")
		}
		if p := policy(e.do(ctx, "GET", e.url("/delivery-policy"), nil)); !p.AllowTimerURLs {
			t.Fatal("the policy read back is off")
		}
		// The server's allow list admits 127.0.0.1, as for endpoints.
		for _, u := range []string{target, "http://127.0.0.1:9/local"} {
			id := "own-" + map[bool]string{true: "local", false: "public"}[strings.Contains(u, "127.0.0.1")]
			if r := e.do(ctx, "POST", e.url("/timers"), own(id, u)); r.Status != http.StatusCreated {
				t.Fatalf("timer with URL %s = %d %s", u, r.Status, r.Body)
			}
		}
		got := map[string]string{}
		for fired := 0; fired < 2; {
			res, err := e.q.Engine().Claim(ctx, 10)
			if err != nil || len(res.Fired) == 0 {
				t.Fatalf("claim = %+v, %v (fired %d of 2)", res, err, fired)
			}
			fired += len(res.Fired)
		}
		evs, _, err := e.q.Inspect().RecentFires(ctx, 10)
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs {
			if ev.Endpoint != "billing" {
				t.Errorf("fire of %s names endpoint %q, want billing", ev.ID, ev.Endpoint)
			}
			got[ev.ID] = ev.URL
		}
		if got["own-public"] != target || got["own-local"] != "http://127.0.0.1:9/local" {
			t.Errorf("fire events' URLs %v", got)
		}
		r := e.do(ctx, "POST", e.url("/schedules"), map[string]any{"id": "tick", "every": "1h", "deliver": map[string]any{"endpoint": "billing", "url": target}})
		if s := r.schedule(t); r.Status != http.StatusCreated || s.Deliver == nil || s.Deliver.URL == nil || *s.Deliver.URL != target {
			t.Fatalf("schedule with a URL = %d %s", r.Status, r.Body)
		}
		info, err := e.q.Recurring().Get(ctx, "tick")
		if err != nil || info.URL != target || info.Endpoint != "billing" {
			t.Fatalf("GetRecurring = %+v, %v", info, err)
		}
		// Turned off again: new timer URLs are refused.
		policy(e.do(ctx, "PUT", e.url("/delivery-policy"), map[string]any{"allow_timer_urls": false}))
		if r := e.do(ctx, "POST", e.url("/timers"), own("late", target)); r.Status != http.StatusUnprocessableEntity {
			t.Fatalf("timer URL after the policy was turned off = %d %s", r.Status, r.Body)
		}
		// A policy without the field breaks the contract.
		if r := e.do(expectInvalid(ctx), "PUT", e.url("/delivery-policy"), map[string]any{}); r.Status != http.StatusBadRequest {
			t.Fatalf("empty policy = %d %s", r.Status, r.Body)
		}
	})
}
