package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/timerq/timerq/api"
	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/queue"
)

// wantMeta fails unless j carries exactly owner (with epoch), labels and
// deadline ("" for none).
func wantMeta(t *testing.T, where string, j api.MetaJSON, owner string, epoch uint64, labels map[string]string, deadline string) {
	t.Helper()
	gotEpoch, gotDeadline := "none", ""
	if j.Epoch != nil {
		gotEpoch = fmt.Sprint(*j.Epoch)
	}
	if j.Deadline != nil {
		gotDeadline = *j.Deadline
	}
	wantEpoch := "none"
	if owner != "" {
		wantEpoch = fmt.Sprint(epoch)
	}
	if j.Owner != owner || gotEpoch != wantEpoch || !maps.Equal(j.Labels, labels) || gotDeadline != deadline {
		t.Fatalf("%s: owner %q epoch %s labels %v deadline %q; want %q, %s, %v, %q", where, j.Owner, gotEpoch, j.Labels, gotDeadline,
			owner, wantEpoch, labels, deadline)
	}
}

// plusMS is the API time s plus ms milliseconds, as the API writes it.
func plusMS(t *testing.T, s string, ms int64) string {
	t.Helper()
	tm, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatal(err)
	}
	return tm.Add(time.Duration(ms) * time.Millisecond).UTC().Format("2006-01-02T15:04:05.000Z07:00")
}

func timerIDs(t *testing.T, r resp) []string {
	t.Helper()
	if r.Status != http.StatusOK {
		t.Fatalf("list = %d %s", r.Status, r.Body)
	}
	var page struct {
		Timers []api.TimerJSON `json:"timers"`
	}
	if err := json.Unmarshal(r.Body, &page); err != nil {
		t.Fatal(err)
	}
	ids := []string{}
	for _, tm := range page.Timers {
		ids = append(ids, tm.ID)
	}
	slices.Sort(ids)
	return ids
}

// TestTimerOwnerLabelsAndDeadline: a timer created with an owner, labels
// and a deadline (fire_within_ms, fire_by) answers them, GET and the list
// show them, the list's owner and label filters select by them, and a
// fire carries them to the fire stream and to a pull consumer; a timer
// without them shows none of the fields.
func TestTimerOwnerLabelsAndDeadline(t *testing.T) {
	redistest.ForEachAll(t, func(t *testing.T, b *redistest.Backend) {
		e := newEnv(t, b, api.Options{StreamPoll: 10 * time.Millisecond})
		ctx := context.Background()
		const owner = "wf/1 ä"
		labels := map[string]string{"tenant": "acme", "kind": "sla"}
		r := e.do(ctx, "POST", e.url("/timers"), map[string]any{"id": "o-1", "in": "1h", "owner": owner, "labels": labels, "fire_within_ms": 60000})
		if r.Status != http.StatusCreated {
			t.Fatalf("create = %d %s", r.Status, r.Body)
		}
		o1 := r.timer(t)
		deadline := plusMS(t, o1.DueAt, 60000)
		wantMeta(t, "create", o1.MetaJSON, owner, 0, labels, deadline)
		wantMeta(t, "get", e.do(ctx, "GET", e.url("/timers/o-1"), nil).timer(t).MetaJSON, owner, 0, labels, deadline)

		due := time.Now().Add(2 * time.Hour).UTC().Truncate(time.Millisecond)
		by := due.Add(time.Minute).Format(time.RFC3339Nano)
		r = e.do(ctx, "POST", e.url("/timers/batch"), map[string]any{"timers": []any{
			map[string]any{"id": "o-2", "due_at": due.Format(time.RFC3339Nano), "owner": owner, "fire_by": by},
			map[string]any{"id": "plain", "in": "1h"},
		}})
		if r.Status != http.StatusOK {
			t.Fatalf("batch = %d %s", r.Status, r.Body)
		}
		batch := decodeAs[struct {
			Timers []api.TimerJSON `json:"timers"`
		}](t, r).Timers
		wantMeta(t, "batch item", batch[0].MetaJSON, owner, 0, nil, plusMS(t, by, 0))
		wantMeta(t, "plain batch item", batch[1].MetaJSON, "", 0, nil, "")
		if g := e.do(ctx, "GET", e.url("/timers/plain"), nil); strings.Contains(string(g.Body), "owner") || strings.Contains(string(g.Body), "epoch") {
			t.Fatalf("a timer without an owner shows one: %s", g.Body)
		}

		list := func(q string) []string { return timerIDs(t, e.do(ctx, "GET", e.url("/timers?"+q), nil)) }
		for q, want := range map[string]string{
			"owner=" + url.QueryEscape(owner):                     "[o-1 o-2]",
			"owner=other":                                         "[]",
			"label=tenant%3Dacme":                                 "[o-1]",
			"label=tenant=acme&label=kind=sla":                    "[o-1]",
			"label=tenant=acme&label=kind=other":                  "[]",
			"owner=" + url.QueryEscape(owner) + "&label=kind=sla": "[o-1]",
			"": "[o-1 o-2 plain]",
		} {
			if got := fmt.Sprint(list(q)); got != want {
				t.Errorf("list ?%s = %s, want %s", q, got, want)
			}
		}
		for _, c := range []struct {
			query      string
			docInvalid bool
			status     int
			want       string
		}{
			{"label=tenant", true, 400, `label "tenant" is not KEY=VALUE`},
			{"label=tenant=a&label=tenant=b", false, 400, `label "tenant" is given twice`},
			{"owner=a%01b", false, 422, "control character"},
			{"label=k=v%01", false, 422, "control character"},
		} {
			rctx := ctx
			if c.docInvalid {
				rctx = expectInvalid(ctx)
			}
			r := e.do(rctx, "GET", e.url("/timers?"+c.query), nil)
			if p := r.problem(t); r.Status != c.status || !strings.Contains(p.Detail, c.want) {
				t.Errorf("list ?%s = %d %s, want %d with %q", c.query, r.Status, r.Body, c.status, c.want)
			}
		}

		// The fire carries them: to the stream, and to a pull consumer.
		s := e.openStream("", "")
		if r := e.do(ctx, "POST", e.url("/timers"), map[string]any{"id": "now", "in": "0s", "owner": owner, "labels": labels}); r.Status != http.StatusCreated {
			t.Fatalf("create = %d %s", r.Status, r.Body)
		}
		redistest.AwaitServerTime(t, b.Client, time.Now().Add(time.Millisecond))
		if got := e.claimAll(); fmt.Sprint(got) != "[now]" {
			t.Fatalf("claimed %v", got)
		}
		f, _ := s.fire()
		wantMeta(t, "fire event", f.MetaJSON, owner, 0, labels, "")
		ds := e.lease(map[string]any{"consumer": "w1", "count": 10})
		if len(ds) != 1 {
			t.Fatalf("leased %+v", ds)
		}
		wantMeta(t, "pull delivery", ds[0].MetaJSON, owner, 0, labels, "")
	})
}

type ownerState struct {
	Owner      string  `json:"owner"`
	Epoch      uint64  `json:"epoch"`
	Scheduled  int64   `json:"scheduled"`
	NextWakeAt *string `json:"next_wake_at"`
}

// TestOwnerEpochRoutes: GET .../owners/{owner} reads an owner's epoch and
// next wake, POST .../owners/{owner}/epoch bumps the epoch (and with
// cancel_older cancels the older timers, answering the job); a create
// under a stale epoch is 409 stale-epoch naming the field, and writes
// nothing. The owner is the router's {owner}, unescaped: a '/' in it is
// %2F in the path.
func TestOwnerEpochRoutes(t *testing.T) {
	redistest.ForEachAll(t, func(t *testing.T, b *redistest.Backend) {
		e := newEnv(t, b, api.Options{})
		ctx := context.Background()
		const owner = "wf/42 x"
		ownerURL := e.url("/owners/" + url.PathEscape(owner))
		get := func() ownerState {
			t.Helper()
			r := e.do(ctx, "GET", ownerURL, nil)
			if r.Status != http.StatusOK {
				t.Fatalf("GET owner = %d %s", r.Status, r.Body)
			}
			return decodeAs[ownerState](t, r)
		}
		if o := get(); o.Owner != owner || o.Epoch != 0 || o.Scheduled != 0 || o.NextWakeAt != nil {
			t.Fatalf("a new owner: %+v", o)
		}
		first := time.Now().Add(time.Hour).UTC().Truncate(time.Millisecond)
		var batch []any
		for i := range 3 {
			batch = append(batch, map[string]any{"id": fmt.Sprint("t", i), "due_at": first.Add(time.Duration(i) * time.Minute).Format(time.RFC3339Nano), "owner": owner})
		}
		// Another owner's, and one whose owner is the prefix of ours.
		batch = append(batch, map[string]any{"id": "other", "due_at": first.Add(-time.Minute).Format(time.RFC3339Nano), "owner": "wf/42"})
		if r := e.do(ctx, "POST", e.url("/timers/batch"), map[string]any{"timers": batch}); r.Status != http.StatusOK {
			t.Fatalf("batch = %d %s", r.Status, r.Body)
		}
		if o := get(); o.Scheduled != 3 || o.NextWakeAt == nil || *o.NextWakeAt != plusMS(t, first.Format(time.RFC3339Nano), 0) {
			t.Fatalf("owner with 3 timers: %+v, want next wake %s", o, first)
		}

		r := e.do(ctx, "POST", ownerURL+"/epoch", nil)
		bumped := decodeAs[api.BumpedJSON](t, r)
		if r.Status != http.StatusOK || bumped.Owner != owner || bumped.Epoch != 1 || bumped.CancelJob != nil {
			t.Fatalf("bump = %d %s", r.Status, r.Body)
		}

		// Under a stale epoch, a create is refused whole, naming the field.
		before := e.snapshot()
		for _, c := range []struct {
			path  string
			body  any
			field string
		}{
			{"/timers", map[string]any{"id": "stale", "in": "1h", "owner": owner, "epoch": 7}, "/epoch"},
			{"/timers/batch", map[string]any{"timers": []any{
				// An existing timer, left as it is (on any shard: nothing
				// is written of it), then one under a stale epoch.
				map[string]any{"id": "t0", "in": "1h", "owner": owner, "epoch": 1},
				map[string]any{"id": "stale", "in": "1h", "owner": owner, "epoch": 5},
			}}, "/timers/1/epoch"},
		} {
			r := e.do(ctx, "POST", e.url(c.path), c.body)
			p := r.problem(t)
			if r.Status != http.StatusConflict || p.Type != api.ProblemTypePrefix+api.SlugStaleEpoch || p.Field != c.field ||
				!strings.Contains(p.Detail, "is at epoch 1") || !strings.Contains(p.Detail, "/owners/{owner}") {
				t.Errorf("POST %s under a stale epoch = %d %s, want 409 stale-epoch naming %s", c.path, r.Status, r.Body, c.field)
			}
		}
		if after := e.snapshot(); after != before {
			t.Fatalf("a create under a stale epoch wrote:\nbefore %s\nafter  %s", before, after)
		}
		r = e.do(ctx, "POST", e.url("/timers"), map[string]any{"id": "current", "in": "1h", "owner": owner, "epoch": 1})
		if r.Status != http.StatusCreated {
			t.Fatalf("create under the current epoch = %d %s", r.Status, r.Body)
		}
		wantMeta(t, "create under epoch 1", r.timer(t).MetaJSON, owner, 1, nil, "")

		r = e.do(ctx, "POST", ownerURL+"/epoch", map[string]any{"cancel_older": true})
		bumped = decodeAs[api.BumpedJSON](t, r)
		job := bumped.CancelJob
		if r.Status != http.StatusOK || bumped.Epoch != 2 || job == nil || job.State != "done" || job.Counts.Cancelled != 4 ||
			job.Filter.Owner != owner || job.Filter.EpochBelow != 2 || job.Filter.IDPrefix != "" {
			t.Fatalf("bump with cancel_older = %d %s", r.Status, r.Body)
		}
		if g := e.do(ctx, "GET", e.url("/cancel-jobs/"+job.ID), nil); g.Status != http.StatusOK || !reflect.DeepEqual(g.cancelJob(t).Filter, job.Filter) {
			t.Fatalf("GET the bump's job = %d %s", g.Status, g.Body)
		}
		if o := get(); o.Epoch != 2 || o.Scheduled != 0 || o.NextWakeAt != nil {
			t.Fatalf("after the bump with cancel_older: %+v", o)
		}
		if tm, err := e.q.Get(ctx, "other"); err != nil || tm.State != queue.StateScheduled {
			t.Fatalf("another owner's timer: %+v %v", tm, err)
		}

		for _, c := range []struct {
			method, url string
			body        any
			docInvalid  bool
			status      int
			slug, want  string
		}{
			{"GET", e.url("/owners/a%01b"), nil, false, 422, api.SlugInvalidArgument, "control character"},
			{"POST", e.url("/owners/a%01b/epoch"), nil, false, 422, api.SlugInvalidArgument, "control character"},
			{"GET", e.url("/owners/" + strings.Repeat("o", queue.MaxOwnerBytes+1)), nil, false, 422, api.SlugInvalidArgument, "257 bytes long"},
			{"POST", ownerURL + "/epoch", map[string]any{"cancel_older": "yes"}, true, 400, api.SlugInvalidRequest, "/cancel_older"},
			{"POST", ownerURL + "/epoch", map[string]any{"cancel": true}, true, 400, api.SlugInvalidRequest, `unknown field "cancel"`},
			{"GET", ownerURL + "?epoch=1", nil, false, 400, api.SlugInvalidRequest, `unknown query parameter "epoch"`},
		} {
			rctx := ctx
			if c.docInvalid {
				rctx = expectInvalid(ctx)
			}
			r := e.do(rctx, c.method, c.url, c.body)
			if p := r.problem(t); r.Status != c.status || p.Type != api.ProblemTypePrefix+c.slug || !strings.Contains(p.Detail, c.want) {
				t.Errorf("%s %s = %d %s, want %d %s with %q", c.method, c.url, r.Status, r.Body, c.status, c.slug, c.want)
			}
		}
		if o := get(); o.Epoch != 2 {
			t.Fatalf("a refused bump bumped: %+v", o)
		}
	})
}

// TestBulkCancelByOwnerAndLabels: POST .../timers/cancel selects by owner
// and labels (with an ID prefix too), the job shows its filter, and a
// filter of nothing, or an epoch without an owner, is refused.
func TestBulkCancelByOwnerAndLabels(t *testing.T) {
	redistest.ForEachAll(t, func(t *testing.T, b *redistest.Backend) {
		e := newEnv(t, b, api.Options{})
		ctx := context.Background()
		due := time.Now().Add(time.Hour)
		var batch []queue.NewTimer
		for i := range 12 {
			batch = append(batch, queue.NewTimer{ID: fmt.Sprintf("p%d-%d", i%2, i), Due: due, Owner: []string{"a", "b", "c"}[i%3],
				Labels: map[string]string{"tenant": "acme", "parity": fmt.Sprint(i % 2)}})
		}
		if _, err := e.q.ScheduleBatch(ctx, batch); err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			filter    api.CancelFilterJSON
			cancelled int64
		}{
			// Owner a: i = 0, 3, 6, 9; of them, ID prefix p0-: 0 and 6.
			{api.CancelFilterJSON{Owner: "a", IDPrefix: "p0-"}, 2},
			// Owner b, parity 1: i = 1, 7.
			{api.CancelFilterJSON{Owner: "b", Labels: map[string]string{"parity": "1"}}, 2},
			// Label tenant=acme: the 8 left.
			{api.CancelFilterJSON{Labels: map[string]string{"tenant": "acme"}}, 8},
		} {
			r := e.do(ctx, "POST", e.url("/timers/cancel"), c.filter)
			j := r.cancelJob(t)
			if r.Status != http.StatusOK || j.State != "done" || j.Counts.Cancelled != c.cancelled ||
				j.Filter.Owner != c.filter.Owner || j.Filter.IDPrefix != c.filter.IDPrefix || !maps.Equal(j.Filter.Labels, c.filter.Labels) {
				t.Fatalf("cancel %+v = %d %s, want %d cancelled", c.filter, r.Status, r.Body, c.cancelled)
			}
		}
		before := e.snapshot()
		for _, c := range []struct {
			body       string
			docInvalid bool
			status     int
			want       string
		}{
			{`{}`, true, 422, "the filter is empty"},
			{`{"id_prefix": "p", "epoch_below": 3}`, false, 422, "give the owner too"},
			{`{"owner": "a\u0001"}`, false, 422, "control character"},
			{`{"labels": {"bad key": "v"}}`, true, 422, `label key "bad key"`},
			{`{"labels": {"k": 1}}`, true, 400, "/labels"},
		} {
			rctx := ctx
			if c.docInvalid {
				rctx = expectInvalid(ctx)
			}
			r := e.do(rctx, "POST", e.url("/timers/cancel"), c.body)
			if p := r.problem(t); r.Status != c.status || !strings.Contains(p.Detail+p.Field, c.want) {
				t.Errorf("cancel %s = %d %s, want %d with %q", c.body, r.Status, r.Body, c.status, c.want)
			}
		}
		if after := e.snapshot(); after != before {
			t.Fatalf("a refused bulk cancel wrote:\nbefore %s\nafter  %s", before, after)
		}
	})
}
