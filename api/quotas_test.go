package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/timerq/timerq/api"
	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/queue"
)

// TestQuotas: GET .../quotas answers the defaults until PUT sets them; a
// request past a quota is refused with 403 quota-exceeded naming it, and
// nothing is written; GET /v1/namespaces/{ns} shows the usage against each.
func TestQuotas(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		e := newEnv(t, b, api.Options{})
		ctx := context.Background()
		quotas := func(r resp) api.QuotasJSON {
			t.Helper()
			var j api.QuotasJSON
			if r.Status != http.StatusOK || json.Unmarshal(r.Body, &j) != nil {
				t.Fatalf("quotas = %d %s", r.Status, r.Body)
			}
			return j
		}
		if got := quotas(e.do(ctx, "GET", e.url("/quotas"), nil)); got != api.QuotasJSON(queue.DefaultQuotas) {
			t.Fatalf("default quotas = %+v, want %+v", got, queue.DefaultQuotas)
		}
		// Schedules left out: its default.
		want := api.QuotasJSON{Pending: 2, Endpoints: 1, Schedules: queue.DefaultQuotas.Schedules}
		if got := quotas(e.do(ctx, "PUT", e.url("/quotas"), map[string]any{"pending": 2, "endpoints": 1})); got != want {
			t.Fatalf("PUT quotas = %+v, want %+v", got, want)
		}
		if got := quotas(e.do(ctx, "GET", e.url("/quotas"), nil)); got != want {
			t.Fatalf("GET after PUT = %+v, want %+v", got, want)
		}
		if r := e.do(expectInvalid(ctx), "PUT", e.url("/quotas"), map[string]any{"pending": -1}); r.Status != http.StatusUnprocessableEntity {
			t.Fatalf("a negative quota = %d %s, want 422", r.Status, r.Body)
		}

		if r := e.do(ctx, "POST", e.url("/timers"), map[string]any{"id": "a", "in": "1h"}); r.Status != http.StatusCreated {
			t.Fatalf("first timer = %d %s", r.Status, r.Body)
		}
		if r := e.do(ctx, "PUT", e.url("/endpoints/billing"), billingBody()); r.Status != http.StatusCreated {
			t.Fatalf("put endpoint = %d %s", r.Status, r.Body)
		}
		before := e.snapshot()
		for _, c := range []struct {
			method, path string
			body         any
			quota        string
		}{
			{"POST", "/timers/batch", map[string]any{"timers": []map[string]any{{"id": "b", "in": "1h"}, {"id": "c", "in": "1h"}}}, "pending"},
			{"PUT", "/endpoints/audit", billingBody(), "endpoints"},
		} {
			r := e.do(ctx, c.method, e.url(c.path), c.body)
			p := r.problem(t)
			if r.Status != http.StatusForbidden || p.Type != api.ProblemTypePrefix+api.SlugQuotaExceeded || p.Quota != c.quota || p.Namespace != e.ns {
				t.Fatalf("%s %s past the %s quota = %d %s, want 403 quota-exceeded naming it", c.method, c.path, c.quota, r.Status, r.Body)
			}
		}
		if after := e.snapshot(); after != before {
			t.Fatalf("a refused request wrote:\nbefore %s\nafter  %s", before, after)
		}
		if r := e.do(ctx, "POST", e.url("/timers"), map[string]any{"id": "b", "in": "1h"}); r.Status != http.StatusCreated {
			t.Fatalf("a timer within the quota = %d %s", r.Status, r.Body)
		}

		r := e.do(ctx, "GET", e.url(""), nil)
		var ns api.NamespaceJSON
		if r.Status != http.StatusOK || json.Unmarshal(r.Body, &ns) != nil || ns.Quotas == nil {
			t.Fatalf("GET namespace = %d %s", r.Status, r.Body)
		}
		if got := fmt.Sprintf("%+v", *ns.Quotas); got != "{Pending:{Limit:2 Usage:2} Endpoints:{Limit:1 Usage:1} Schedules:{Limit:10000 Usage:0}}" {
			t.Fatalf("usage = %s", got)
		}
	})
}
