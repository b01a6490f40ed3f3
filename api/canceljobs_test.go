package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"testing"
	"time"

	"github.com/timerq/timerq/api"
	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/queue"
)

func (r resp) cancelJob(t testing.TB) api.CancelJobJSON {
	t.Helper()
	var j api.CancelJobJSON
	if err := json.Unmarshal(r.Body, &j); err != nil {
		t.Fatalf("answer %d %s is not a cancel job: %v", r.Status, r.Body, err)
	}
	return j
}

// TestBulkCancelRoutes: POST .../timers/cancel cancels the timers of a
// prefix and answers the job, which GET .../cancel-jobs/{id} and
// .../cancel-jobs read back; a job too large for the call answers 202.
func TestBulkCancelRoutes(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		e := newEnv(t, b, api.Options{})
		var batch []queue.NewTimer
		for i := range 5 {
			batch = append(batch, queue.NewTimer{ID: fmt.Sprint("bulk/", i), Due: time.Now().Add(time.Hour)})
		}
		batch = append(batch, queue.NewTimer{ID: "bulk", Due: time.Now().Add(time.Hour)})
		if _, err := e.q.ScheduleBatch(ctx, batch); err != nil {
			t.Fatal(err)
		}
		r := e.do(ctx, "POST", e.url("/timers/cancel"), map[string]any{"id_prefix": "bulk/"})
		j := r.cancelJob(t)
		if r.Status != http.StatusOK || j.State != "done" || j.Counts.Cancelled != 5 || j.FinishedAt == nil || j.Filter.IDPrefix != "bulk/" {
			t.Fatalf("POST cancel = %d %s", r.Status, r.Body)
		}
		if tm, err := e.q.Get(ctx, "bulk"); err != nil || tm.State != queue.StateScheduled {
			t.Fatalf("bulk = %+v, %v; want it left scheduled", tm, err)
		}
		if g := e.do(ctx, "GET", e.url("/cancel-jobs/"+j.ID), nil); g.Status != http.StatusOK || !reflect.DeepEqual(g.cancelJob(t), j) {
			t.Fatalf("GET job = %d %s, want %+v", g.Status, g.Body, j)
		}
		l := e.do(ctx, "GET", e.url("/cancel-jobs"), nil)
		var list struct {
			CancelJobs []api.CancelJobJSON `json:"cancel_jobs"`
		}
		if err := json.Unmarshal(l.Body, &list); err != nil || l.Status != http.StatusOK || len(list.CancelJobs) != 1 || !reflect.DeepEqual(list.CancelJobs[0], j) {
			t.Fatalf("GET jobs = %d %s", l.Status, l.Body)
		}
		if g := e.do(ctx, "GET", e.url("/cancel-jobs/nope"), nil); g.Status != http.StatusNotFound || g.problem(t).Type != api.ProblemTypePrefix+api.SlugNotFound {
			t.Fatalf("GET unknown job = %d %s", g.Status, g.Body)
		}
		if p := e.do(expectInvalid(ctx), "POST", e.url("/timers/cancel"), map[string]any{"id_prefix": ""}); p.Status != http.StatusUnprocessableEntity || p.problem(t).Type != api.ProblemTypePrefix+api.SlugInvalidArgument {
			t.Fatalf("empty prefix = %d %s", p.Status, p.Body)
		}
		if b.Mini != nil {
			return // more than queue.CancelInCall timers: the real server only
		}
		batch = batch[:0]
		for i := range queue.CancelInCall + 2000 {
			batch = append(batch, queue.NewTimer{ID: fmt.Sprint("big/", i), Due: time.Now().Add(time.Hour)})
		}
		for len(batch) > 0 {
			n := min(len(batch), 1000)
			if _, err := e.q.ScheduleBatch(ctx, batch[:n]); err != nil {
				t.Fatal(err)
			}
			batch = batch[n:]
		}
		r = e.do(ctx, "POST", e.url("/timers/cancel"), map[string]any{"id_prefix": "big/"})
		if j := r.cancelJob(t); r.Status != http.StatusAccepted || j.State != "running" || j.FinishedAt != nil {
			t.Fatalf("POST cancel of a large set = %d %s, want 202 running", r.Status, r.Body)
		}
	})
}
