package api_test

import (
	"context"
	"maps"
	"net/http"
	"strings"
	"testing"

	"github.com/timerq/timerq/api"
	"github.com/timerq/timerq/internal/redistest"
)

// TestSchedulesAndDebounceTakeOwners: a schedule's owner and labels are
// answered back and go to its occurrences; the call that opens a debounce
// window gives its timer an owner and labels; both appear on the timers
// the API reads, and the owner's route counts them.
func TestSchedulesAndDebounceTakeOwners(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		e := newEnv(t, b, api.Options{})
		ctx := context.Background()
		labels := map[string]string{"team": "billing"}
		r := e.do(ctx, "POST", e.url("/schedules"), map[string]any{"id": "tick", "every": "1h", "owner": "wf-7", "labels": labels})
		if r.Status != http.StatusCreated {
			t.Fatalf("create schedule = %d %s", r.Status, r.Body)
		}
		s := decodeAs[api.ScheduleJSON](t, r)
		if s.Owner != "wf-7" || !maps.Equal(s.Labels, labels) || len(s.Pending) == 0 {
			t.Fatalf("schedule answered %+v", s)
		}
		occ := e.do(ctx, "GET", e.url("/timers/"+pathID(s.Pending[0].ID)), nil).timer(t)
		if occ.Owner != "wf-7" || !maps.Equal(occ.Labels, labels) {
			t.Fatalf("occurrence %s: owner %v labels %v", s.Pending[0].ID, occ.Owner, occ.Labels)
		}
		// A PUT replaces the schedule: its labels may change, its owner not.
		relabel := map[string]string{"team": "ops"}
		r = e.do(ctx, "PUT", e.url("/schedules/tick"), map[string]any{"every": "2h", "owner": "wf-7", "labels": relabel})
		if got := decodeAs[api.ScheduleJSON](t, r); r.Status != http.StatusOK || got.Owner != "wf-7" || !maps.Equal(got.Labels, relabel) {
			t.Fatalf("update = %d %s", r.Status, r.Body)
		}
		r = e.do(ctx, "PUT", e.url("/schedules/tick"), map[string]any{"every": "2h", "owner": "wf-8"})
		if r.Status != http.StatusUnprocessableEntity || !strings.Contains(string(r.Body), `"field":"/owner"`) {
			t.Fatalf("update to another owner = %d %s, want 422 naming /owner", r.Status, r.Body)
		}

		r = e.do(ctx, "POST", e.url("/debounce/mail"), map[string]any{"delay": "1h", "max_wait": "2h", "owner": "wf-7", "labels": labels})
		d := decodeAs[api.DebounceResultJSON](t, r)
		if r.Status != http.StatusCreated || d.Timer.Owner != "wf-7" || !maps.Equal(d.Timer.Labels, labels) {
			t.Fatalf("debounce = %d %s", r.Status, r.Body)
		}
		r = e.do(ctx, "GET", e.url("/owners/wf-7"), nil)
		if r.Status != http.StatusOK {
			t.Fatalf("owner = %d %s", r.Status, r.Body)
		}
		if o := decodeAs[api.OwnerJSON](t, r); o.Scheduled < 2 {
			t.Fatalf("owner %+v, want the occurrences and the window's timer", o)
		}
	})
}
