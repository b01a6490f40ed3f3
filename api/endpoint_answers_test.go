package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/timerq/timerq/api"
	"github.com/timerq/timerq/internal/redistest"
)

// An endpoint that leaves its timeout to the dispatcher's default is
// answered without "timeout" (as the retry policy's unset fields are), not
// with an empty string where the contract promises a Go duration: every
// answer here is checked against the contract's pattern, and the field
// must be absent.
func TestEndpointAnswerLeavesUnsetTimeoutOut(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		e := newEnv(t, b, api.Options{})
		ctx := context.Background()
		minimal := map[string]any{"url": "https://billing.example.com/hooks", "secrets": []string{secret('a')}}
		for _, r := range []resp{
			e.do(ctx, "PUT", e.url("/endpoints/plain"), minimal),
			e.do(ctx, "GET", e.url("/endpoints/plain"), nil),
			e.do(ctx, "POST", e.url("/endpoints/plain/disable"), nil),
		} {
			var got map[string]any
			if err := json.Unmarshal(r.Body, &got); r.Status >= 300 || err != nil {
				t.Fatalf("%d %s (%v)", r.Status, r.Body, err)
			}
			if v, ok := got["timeout"]; ok {
				t.Errorf("an endpoint without a timeout is answered with \"timeout\": %q; want the field absent", v)
			}
		}
		r := e.do(ctx, "GET", e.url("/endpoints"), nil)
		if r.Status != http.StatusOK || strings.Contains(string(r.Body), `"timeout"`) {
			t.Errorf("list = %d %s; want no timeout field", r.Status, r.Body)
		}
		with := billingBody() // timeout 5s
		if r := e.do(ctx, "PUT", e.url("/endpoints/billing"), with); r.Status != http.StatusCreated || r.endpoint(t).Timeout != "5s" {
			t.Errorf("an endpoint with a timeout = %d %s; want timeout 5s", r.Status, r.Body)
		}
	})
}

// A refused private address names what admits it for the API's operator
// (Options.EndpointAllowSetting: a server gives its flag), never the
// delivery engine's Go field, for an endpoint and for a timer's own URL.
func TestPrivateAddressRefusalNamesTheSetting(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		for _, c := range []struct{ setting, want string }{
			{"", "api.Options.EndpointAllow"},
			{"--deliver-allow (TIMERQ_DELIVER_ALLOW)", "--deliver-allow (TIMERQ_DELIVER_ALLOW)"},
		} {
			e := newEnv(t, b, api.Options{EndpointAllowSetting: c.setting})
			if r := e.do(ctx, "PUT", e.url("/endpoints/billing"), billingBody()); r.Status != http.StatusCreated {
				t.Fatalf("PUT billing = %d %s", r.Status, r.Body)
			}
			for _, u := range []string{"http://127.0.0.1:9/", "http://localhost:9/", "http://169.254.169.254/"} {
				body := billingBody()
				body["url"] = u
				answers := map[string]resp{
					"endpoint": e.do(ctx, "PUT", e.url("/endpoints/local"), body),
					"timer URL": e.do(ctx, "POST", e.url("/timers"), map[string]any{"id": "t", "in": "1h",
						"deliver": map[string]any{"endpoint": "billing", "url": u}}),
				}
				for what, r := range answers {
					p := r.problem(t)
					if r.Status != http.StatusUnprocessableEntity || !strings.Contains(p.Detail, c.want) || strings.Contains(p.Detail, "Guard.") ||
						strings.Contains(p.Detail, "Allow entry") || strings.Contains(p.Detail, "timerworker's") {
						t.Errorf("%s %s with setting %q = %d %q; want 422 naming %s, not the Go API", what, u, c.setting, r.Status, p.Detail, c.want)
					}
				}
			}
		}
	})
}
