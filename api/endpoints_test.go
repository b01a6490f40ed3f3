package api_test

import (
	"context"
	"encoding/base64"
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

func secret(b byte) string {
	return queue.SecretPrefix + base64.StdEncoding.EncodeToString([]byte(strings.Repeat(string(b), 32)))
}

func (r resp) endpoint(t testing.TB) api.EndpointJSON {
	t.Helper()
	var j api.EndpointJSON
	if err := json.Unmarshal(r.Body, &j); err != nil {
		t.Fatalf("answer %d %s is not an endpoint: %v", r.Status, r.Body, err)
	}
	return j
}

func billingBody() map[string]any {
	return map[string]any{
		"url":           "https://billing.example.com/hooks",
		"headers":       map[string]string{"Authorization": "Bearer x"},
		"timeout":       "5s",
		"retry":         map[string]any{"max_attempts": 5, "max_age": "1h", "backoff_base": "1s", "backoff_cap": "1m", "dead_letter_client_errors": false},
		"max_in_flight": 4,
		"secrets":       []string{secret('a'), secret('b')},
	}
}

// TestEndpointLifecycle creates, replaces, reads, lists, disables, enables
// and deletes an endpoint; no answer carries a secret whole.
func TestEndpointLifecycle(t *testing.T) {
	redistest.ForEachAll(t, func(t *testing.T, b *redistest.Backend) {
		e := newEnv(t, b, api.Options{})
		ctx := context.Background()
		noSecret := func(r resp) {
			t.Helper()
			for _, s := range []string{secret('a'), secret('b')} {
				if strings.Contains(string(r.Body), s[len(queue.SecretPrefix):len(queue.SecretPrefix)+12]) {
					t.Fatalf("the answer carries a secret: %s", r.Body)
				}
			}
			// Header values (here a bearer token) are redacted as secrets are.
			if strings.Contains(string(r.Body), "Bearer x") || !strings.Contains(string(r.Body), `"Authorization":"`+queue.RedactHeader("Bearer x")+`"`) {
				t.Fatalf("the answer does not redact the header value: %s", r.Body)
			}
		}
		r := e.do(ctx, "PUT", e.url("/endpoints/billing"), billingBody())
		noSecret(r)
		j := r.endpoint(t)
		if r.Status != http.StatusCreated || !*j.Created || j.Timeout != "5s" || j.Retry.MaxAttempts != 5 || j.Retry.MaxAge != "1h0m0s" ||
			*j.Retry.DeadLetterClientErrors || !j.Enabled || len(j.Secrets) != 2 || !strings.HasPrefix(j.Secrets[0], "whsec_") {
			t.Fatalf("create = %d %s", r.Status, r.Body)
		}
		stored, err := e.q.Endpoints().Get(ctx, "billing")
		if err != nil || stored.Secrets[1].Reveal() != secret('b') || !stored.Retry.RetryClientErrors {
			t.Fatalf("stored = %+v, %v", stored, err)
		}
		body := billingBody()
		body["url"] = "https://billing.example.com/v2"
		body["enabled"] = false
		if r := e.do(ctx, "PUT", e.url("/endpoints/billing"), body); r.Status != http.StatusOK || *r.endpoint(t).Created || r.endpoint(t).Enabled {
			t.Fatalf("replace = %d %s", r.Status, r.Body)
		}
		r = e.do(ctx, "GET", e.url("/endpoints/billing"), nil)
		noSecret(r)
		if r.Status != http.StatusOK || r.endpoint(t).URL != "https://billing.example.com/v2" {
			t.Fatalf("get = %d %s", r.Status, r.Body)
		}
		if r := e.do(ctx, "POST", e.url("/endpoints/billing/enable"), nil); r.Status != http.StatusOK || !r.endpoint(t).Enabled {
			t.Fatalf("enable = %d %s", r.Status, r.Body)
		}
		if r := e.do(ctx, "POST", e.url("/endpoints/billing/disable"), nil); r.Status != http.StatusOK || r.endpoint(t).Enabled {
			t.Fatalf("disable = %d %s", r.Status, r.Body)
		}
		r = e.do(ctx, "GET", e.url("/endpoints"), nil)
		noSecret(r)
		var list struct{ Endpoints []api.EndpointJSON }
		if r.Status != http.StatusOK || json.Unmarshal(r.Body, &list) != nil || len(list.Endpoints) != 1 || list.Endpoints[0].Name != "billing" {
			t.Fatalf("list = %d %s", r.Status, r.Body)
		}
		// A redacted value read back and sent again is refused, not
		// stored in place of the token.
		back := billingBody()
		back["headers"] = list.Endpoints[0].Headers
		if r := e.do(ctx, "PUT", e.url("/endpoints/billing"), back); r.Status != http.StatusUnprocessableEntity ||
			r.problem(t).Field != "/headers" || !strings.Contains(r.problem(t).Detail, "redacted") {
			t.Fatalf("put of a redacted header value = %d %s", r.Status, r.Body)
		}
		if r := e.do(ctx, "DELETE", e.url("/endpoints/billing"), nil); r.Status != http.StatusNoContent {
			t.Fatalf("delete = %d %s", r.Status, r.Body)
		}
		for _, c := range []struct{ method, path string }{{"GET", "/endpoints/billing"}, {"DELETE", "/endpoints/billing"}, {"POST", "/endpoints/billing/enable"}} {
			r := e.do(ctx, c.method, e.url(c.path), nil)
			// The hint names the API's route, not the Go call.
			if p := r.problem(t); r.Status != http.StatusNotFound || p.Type != api.ProblemTypePrefix+api.SlugEndpointNotFound ||
				!strings.HasSuffix(p.Detail, "/endpoints") || strings.Contains(p.Detail, "Endpoints()") {
				t.Errorf("%s %s after delete = %d %s", c.method, c.path, r.Status, r.Body)
			}
		}
	})
}

// Each bad endpoint is refused with 422 invalid-endpoint naming the field,
// and nothing is written; the server's allow list admits a private range.
func TestEndpointBadInput(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		e := newEnv(t, b, api.Options{})
		ctx := context.Background()
		before := e.snapshot()
		with := func(k string, v any) map[string]any { m := billingBody(); m[k] = v; return m }
		for _, c := range []struct {
			name  string
			body  map[string]any
			field string
			want  string
		}{
			{"ftp", with("url", "ftp://example.com/"), "/url", "scheme"},
			{"userinfo", with("url", "https://u:p@example.com/"), "/url", "user information"},
			{"loopback", with("url", "http://127.0.0.1:9/"), "/url", "127.0.0.0/8"},
			{"metadata", with("url", "http://169.254.169.254/"), "/url", "169.254.0.0/16"},
			{"short secret", with("secrets", []string{"whsec_" + base64.StdEncoding.EncodeToString([]byte("short"))}), "/secrets", "5 bytes"},
			{"reserved header", with("headers", map[string]string{"webhook-id": "x"}), "/headers", "set by the delivery"},
		} {
			r := e.do(ctx, "PUT", e.url("/endpoints/billing"), c.body)
			p := r.problem(t)
			if r.Status != http.StatusUnprocessableEntity || p.Type != api.ProblemTypePrefix+api.SlugInvalidEndpoint || p.Field != c.field || !strings.Contains(p.Detail, c.want) {
				t.Errorf("%s: %d %s; want 422 invalid-endpoint at %s saying %q", c.name, r.Status, r.Body, c.field, c.want)
			}
		}
		// The contract refuses these itself; the server must too.
		for name, body := range map[string]map[string]any{
			"no secrets": with("secrets", []string{}),
			"bad name":   billingBody(),
		} {
			path := "/endpoints/billing"
			if name == "bad name" {
				path = "/endpoints/bill%20ing"
			}
			r := e.do(expectInvalid(ctx), "PUT", e.url(path), body)
			if r.Status != http.StatusUnprocessableEntity {
				t.Errorf("%s: %d %s, want 422", name, r.Status, r.Body)
			}
		}
		if after := e.snapshot(); after != before {
			t.Fatalf("refused PUTs wrote:\n%s", after)
		}
		// The snapshot holds the timer keys; the endpoints hash is apart.
		if list, err := e.q.Endpoints().List(ctx); err != nil || len(list) != 0 {
			t.Fatalf("refused PUTs stored %v (%v)", list, err)
		}

		allowing := newEnv(t, b, api.Options{EndpointAllow: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}})
		if r := allowing.do(ctx, "PUT", allowing.url("/endpoints/local"), with("url", "http://127.0.0.1:9/")); r.Status != http.StatusCreated {
			t.Fatalf("allowed loopback = %d %s", r.Status, r.Body)
		}
	})
}

// A timer, or a batch item, that delivers to a missing endpoint is refused
// with 422 unknown-endpoint and nothing written; to an existing one it is
// created, and its fire event names the endpoint.
func TestTimerDeliver(t *testing.T) {
	redistest.ForEachAll(t, func(t *testing.T, b *redistest.Backend) {
		e := newEnv(t, b, api.Options{})
		ctx := context.Background()
		before := e.snapshot()
		r := e.do(ctx, "POST", e.url("/timers"), map[string]any{"id": "t1", "in": "0s", "payload_text": "{}", "deliver": map[string]any{"endpoint": "billing"}})
		if p := r.problem(t); r.Status != http.StatusUnprocessableEntity || p.Type != api.ProblemTypePrefix+api.SlugUnknownEndpoint ||
			p.Field != "/deliver/endpoint" || !strings.Contains(p.Detail, `"billing"`) {
			t.Fatalf("timer to a missing endpoint = %d %s", r.Status, r.Body)
		}
		oneCause(t, r.problem(t).Detail)
		r = e.do(ctx, "POST", e.url("/timers/batch"), map[string]any{"timers": []map[string]any{
			{"id": "a", "in": "1h"},
			{"id": "b", "in": "1h", "deliver": map[string]any{"endpoint": "billing"}},
		}})
		if p := r.problem(t); r.Status != http.StatusUnprocessableEntity || p.Field != "/timers/1/deliver/endpoint" {
			t.Fatalf("batch to a missing endpoint = %d %s", r.Status, r.Body)
		}
		oneCause(t, r.problem(t).Detail)
		if after := e.snapshot(); after != before {
			t.Fatalf("refused creates wrote:\n%s", after)
		}
		// The snapshot holds shard 0; the timers may be in others.
		for _, id := range []string{"t1", "a", "b"} {
			if _, err := e.q.Get(ctx, id); !errors.Is(err, queue.ErrNotFound) {
				t.Fatalf("refused timer %s: Get = %v, want ErrNotFound", id, err)
			}
		}
		if r := e.do(ctx, "PUT", e.url("/endpoints/billing"), billingBody()); r.Status != http.StatusCreated {
			t.Fatalf("put = %d %s", r.Status, r.Body)
		}
		past := time.Now().Add(-time.Minute).UTC().Format(time.RFC3339)
		r = e.do(ctx, "POST", e.url("/timers"), map[string]any{"id": "t1", "due_at": past, "payload_text": "{}", "deliver": map[string]any{"endpoint": "billing"}})
		if r.Status != http.StatusCreated {
			t.Fatalf("timer to billing = %d %s", r.Status, r.Body)
		}
		res, err := e.q.Engine().Claim(ctx, 10)
		if err != nil || len(res.Fired) != 1 {
			t.Fatalf("claim = %+v, %v", res, err)
		}
		evs, _, err := e.q.Inspect().RecentFires(ctx, 10)
		if err != nil || len(evs) != 1 || evs[0].Endpoint != "billing" {
			t.Fatalf("fire events = %+v, %v; want one for endpoint billing", evs, err)
		}
		// A deliver object without an endpoint breaks the contract.
		r = e.do(expectInvalid(ctx), "POST", e.url("/timers"), map[string]any{"id": "t2", "in": "1h", "deliver": map[string]any{}})
		if r.Status != http.StatusBadRequest {
			t.Fatalf("deliver without endpoint = %d %s", r.Status, r.Body)
		}
	})
}

// A schedule may deliver its occurrences; naming a missing endpoint is a
// 422 unknown-endpoint with nothing written.
func TestScheduleDeliver(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		e := newEnv(t, b, api.Options{})
		ctx := context.Background()
		before := e.snapshot()
		body := map[string]any{"id": "tick", "every": "1h", "deliver": map[string]any{"endpoint": "billing"}}
		r := e.do(ctx, "POST", e.url("/schedules"), body)
		if p := r.problem(t); r.Status != http.StatusUnprocessableEntity || p.Type != api.ProblemTypePrefix+api.SlugUnknownEndpoint || p.Field != "/deliver/endpoint" {
			t.Fatalf("schedule to a missing endpoint = %d %s", r.Status, r.Body)
		}
		oneCause(t, r.problem(t).Detail)
		if after := e.snapshot(); after != before {
			t.Fatalf("the refused schedule wrote:\n%s", after)
		}
		if _, err := e.q.Recurring().Get(ctx, "tick"); !errors.Is(err, queue.ErrRecurringNotFound) {
			t.Fatalf("refused schedule: GetRecurring = %v", err)
		}
		if r := e.do(ctx, "PUT", e.url("/endpoints/billing"), billingBody()); r.Status != http.StatusCreated {
			t.Fatalf("put = %d %s", r.Status, r.Body)
		}
		r = e.do(ctx, "POST", e.url("/schedules"), body)
		if s := r.schedule(t); r.Status != http.StatusCreated || s.Deliver == nil || *s.Deliver.Endpoint != "billing" {
			t.Fatalf("schedule to billing = %d %s", r.Status, r.Body)
		}
		r = e.do(ctx, "PUT", e.url("/schedules/tick"), map[string]any{"every": "1h", "deliver": map[string]any{"endpoint": "nope"}})
		if p := r.problem(t); r.Status != http.StatusUnprocessableEntity || p.Field != "/deliver/endpoint" {
			t.Fatalf("update to a missing endpoint = %d %s", r.Status, r.Body)
		}
		r = e.do(ctx, "PUT", e.url("/schedules/tick"), map[string]any{"every": "1h"})
		if s := r.schedule(t); r.Status != http.StatusOK || s.Deliver != nil {
			t.Fatalf("update without deliver = %d %s", r.Status, r.Body)
		}
	})
}

// oneCause fails unless detail, an unknown-endpoint refusal's, gives its
// one cause and its fix: nothing was scheduled, so it must not also say
// that the outcome is unknown and a retry may help.
func oneCause(t *testing.T, detail string) {
	t.Helper()
	if strings.Contains(detail, "outcome unknown") || strings.Contains(detail, "retry") {
		t.Errorf("unknown-endpoint detail contradicts itself: %s", detail)
	}
	if !strings.Contains(detail, "nothing was scheduled") || !strings.Contains(detail, "create it first") {
		t.Errorf("unknown-endpoint detail does not give the cause and the fix: %s", detail)
	}
}
