package api_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/timerq/timerq/api"
	"github.com/timerq/timerq/internal/redistest"
)

// TestFlowControlOverHTTP: a flow policy put over HTTP bounds pull-consume:
// timers created with a flow key are leased one at a time (max_in_flight
// 1), the group's flows show the rest parked, and an ack lets the next
// one out. A bad policy is refused with 422 and nothing written.
func TestFlowControlOverHTTP(t *testing.T) {
	redistest.ForEachAll(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		e := newEnv(t, b, api.Options{})
		before := e.snapshot()
		for _, bad := range []struct {
			body      map[string]any
			breaksDoc bool // the document's schema refuses it too
		}{
			{map[string]any{"key": "t", "rate": 0, "period": "1s"}, true},
			{map[string]any{"key": "t", "rate": 5, "period": "-1s"}, false},
			{map[string]any{"key": "t", "rate": 5, "period": "8760h"}, false},
		} {
			c := ctx
			if bad.breaksDoc {
				c = expectInvalid(ctx)
			}
			r := e.do(c, "PUT", e.url("/flow-policies"), bad.body)
			if r.Status != http.StatusUnprocessableEntity {
				t.Fatalf("PUT %v: %d %s, want 422", bad, r.Status, r.Body)
			}
		}
		if after := e.snapshot(); after != before {
			t.Fatalf("refused policies wrote:\n%s", after)
		}
		r := e.do(ctx, "PUT", e.url("/flow-policies"), map[string]any{"key": "t", "rate": 1000, "period": "1s", "max_in_flight": 1})
		if r.Status != http.StatusOK {
			t.Fatalf("PUT policy: %d %s", r.Status, r.Body)
		}
		var timers []map[string]any
		for _, id := range []string{"f0", "f1", "f2"} {
			timers = append(timers, map[string]any{"id": id, "due_at": "2020-01-01T00:00:00Z", "flow_key": "t"})
		}
		if r := e.do(ctx, "POST", e.url("/timers/batch"), map[string]any{"timers": timers}); r.Status != http.StatusOK {
			t.Fatalf("batch: %d %s", r.Status, r.Body)
		}
		if got := e.claimAll(); len(got) != 3 {
			t.Fatalf("fired %d, want 3", len(got))
		}
		ds := e.lease(map[string]any{"consumer": "w1", "count": 10})
		if len(ds) != 1 {
			t.Fatalf("leased %v, want one: the key's bound", ids(ds))
		}
		type flows struct {
			Flows []api.FlowStatJSON `json:"flows"`
		}
		st := decodeAs[flows](t, e.do(ctx, "GET", e.url("/groups/g/flows"), nil)).Flows
		if len(st) != 1 || st[0].Key != "t" || st[0].Backlog != 2 || st[0].InFlight != 1 || st[0].Policy == nil || st[0].Policy.MaxInFlight != 1 {
			t.Fatalf("flows = %+v, want t with 2 parked, 1 in flight", st)
		}
		if r := e.do(ctx, "POST", e.url("/groups/g/ack"), map[string]any{"delivery_ids": []string{ds[0].DeliveryID}}); r.Status != http.StatusOK {
			t.Fatalf("ack: %d %s", r.Status, r.Body)
		}
		var next []api.DeliveryJSON
		redistest.Eventually(t, 5*time.Second, "the next fire of t", func() bool {
			if b.Mini != nil {
				b.Mini.FastForward(time.Second)
			}
			next = append(next, e.lease(map[string]any{"consumer": "w1", "count": 10})...)
			return len(next) > 0
		})
		if len(next) != 1 {
			t.Fatalf("after the ack leased %v, want one", ids(next))
		}
		if r := e.do(ctx, "DELETE", e.url("/flow-policies?key=t"), nil); r.Status != http.StatusNoContent {
			t.Fatalf("DELETE policy: %d %s", r.Status, r.Body)
		}
	})
}

// A schedule created over HTTP with a flow key shows it, and its
// occurrences carry it.
func TestScheduleFlowKeyOverHTTP(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		e := newEnv(t, b, api.Options{})
		r := e.do(ctx, "POST", e.url("/schedules"), map[string]any{"id": "s", "every": "1h", "flow_key": "tenant-3"})
		if r.Status != http.StatusCreated {
			t.Fatalf("create: %d %s", r.Status, r.Body)
		}
		if j := decodeAs[api.ScheduleJSON](t, r); j.FlowKey != "tenant-3" || len(j.Pending) == 0 {
			t.Fatalf("created %+v", j)
		}
		info, err := e.q.Recurring().Get(ctx, "s")
		if err != nil || info.FlowKey != "tenant-3" {
			t.Fatalf("GetRecurring = %+v, %v", info, err)
		}
		r = e.do(ctx, "POST", e.url("/schedules"), map[string]any{"id": "s2", "every": "1h", "flow_key": "bad\u0001key"})
		if r.Status != http.StatusUnprocessableEntity {
			t.Fatalf("a bad flow key: %d %s", r.Status, r.Body)
		}
	})
}
