package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/timerq/timerq/api"
	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/queue"
)

// fire creates n timers already due, with IDs prefix0.., and fires them.
func (e *env) fire(prefix string, n int) {
	e.t.Helper()
	var batch []queue.NewTimer
	for i := range n {
		batch = append(batch, queue.NewTimer{ID: fmt.Sprint(prefix, i), Due: time.Now().Add(-time.Second), Payload: []byte(fmt.Sprint("p", i))})
	}
	if _, err := e.q.ScheduleBatch(context.Background(), batch); err != nil {
		e.t.Fatal(err)
	}
	if got := e.claimAll(); len(got) != n {
		e.t.Fatalf("fired %d, want %d", len(got), n)
	}
}

func decodeAs[T any](t testing.TB, r resp) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(r.Body, &v); err != nil {
		t.Fatalf("answer %d %s: %v", r.Status, r.Body, err)
	}
	return v
}

type leaseResult struct {
	Deliveries []api.DeliveryJSON `json:"deliveries"`
}

func (e *env) lease(body any) []api.DeliveryJSON {
	e.t.Helper()
	r := e.do(context.Background(), "POST", e.url("/groups/g/lease"), body)
	if r.Status != http.StatusOK {
		e.t.Fatalf("lease: %d %s", r.Status, r.Body)
	}
	return decodeAs[leaseResult](e.t, r).Deliveries
}

func ids(ds []api.DeliveryJSON) []string {
	var out []string
	for _, d := range ds {
		out = append(out, d.ID)
	}
	sort.Strings(out)
	return out
}

// TestConsumeOverHTTP: lease, acknowledge, release to a retry and to a
// dead letter, list and requeue it, through the handler and the document.
func TestConsumeOverHTTP(t *testing.T) {
	redistest.ForEachAll(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		e := newEnv(t, b, api.Options{})
		e.fire("c", 3)
		ds := e.lease(map[string]any{"consumer": "w1", "count": 10, "max_attempts": 2})
		if fmt.Sprint(ids(ds)) != "[c0 c1 c2]" {
			t.Fatalf("leased %v", ids(ds))
		}
		byID := map[string]api.DeliveryJSON{}
		for _, d := range ds {
			byID[d.ID] = d
			if d.Attempt != 1 || string(d.Payload) != "p"+strings.TrimPrefix(d.ID, "c") || d.LeaseExpiresAt == "" {
				t.Errorf("delivery %+v", d)
			}
		}
		// Nothing more for another worker while the leases run.
		if more := e.lease(map[string]any{"consumer": "w2"}); len(more) != 0 {
			t.Fatalf("second worker leased %v", ids(more))
		}
		r := e.do(ctx, "POST", e.url("/groups/g/ack"), map[string]any{"delivery_ids": []string{byID["c0"].DeliveryID, byID["c0"].DeliveryID}})
		if r.Status != 200 || string(r.Body) != "{\"acked\":[true,false]}\n" {
			t.Fatalf("ack: %d %s", r.Status, r.Body)
		}

		// c1 fails once: released at once, it comes back as attempt 2.
		r = e.do(ctx, "POST", e.url("/groups/g/deliveries/"+byID["c1"].DeliveryID+"/release"), map[string]any{"error": "boom", "max_attempts": 2})
		if r.Status != 200 || !strings.Contains(string(r.Body), "redeliver_at") {
			t.Fatalf("release: %d %s", r.Status, r.Body)
		}
		again := e.lease(map[string]any{"consumer": "w2", "max_attempts": 2})
		if len(again) != 1 || again[0].ID != "c1" || again[0].Attempt != 2 {
			t.Fatalf("after the release leased %+v, want c1 as attempt 2", again)
		}
		// The first worker's delivery is stale now.
		r = e.do(ctx, "POST", e.url("/groups/g/deliveries/"+byID["c1"].DeliveryID+"/release"), nil)
		if p := r.problem(t); r.Status != 409 || p.Type != api.ProblemTypePrefix+api.SlugLeaseLost {
			t.Fatalf("release of a lost lease: %d %s", r.Status, r.Body)
		}
		r = e.do(ctx, "POST", e.url("/groups/g/deliveries/"+byID["c1"].DeliveryID+"/extend"), nil)
		if r.Status != 409 {
			t.Fatalf("extend of a lost lease: %d %s", r.Status, r.Body)
		}
		r = e.do(ctx, "POST", e.url("/groups/g/deliveries/"+again[0].DeliveryID+"/extend"), map[string]any{"lease_for": "10s"})
		if r.Status != 200 || !strings.Contains(string(r.Body), "lease_expires_at") {
			t.Fatalf("extend: %d %s", r.Status, r.Body)
		}
		// Its last attempt fails: a dead letter.
		r = e.do(ctx, "POST", e.url("/groups/g/deliveries/"+again[0].DeliveryID+"/release"), map[string]any{"error": "boom", "max_attempts": 2})
		rel := decodeAs[struct {
			DeadLetterID string `json:"dead_letter_id"`
		}](t, r)
		if r.Status != 200 || rel.DeadLetterID == "" {
			t.Fatalf("last release: %d %s", r.Status, r.Body)
		}
		r = e.do(ctx, "GET", e.url("/groups/g/dead-letters"), nil)
		page := decodeAs[struct {
			DeadLetters []api.DeadLetterJSON `json:"dead_letters"`
			NextCursor  string               `json:"next_cursor"`
		}](t, r)
		if r.Status != 200 || len(page.DeadLetters) != 1 || page.NextCursor != "" {
			t.Fatalf("dead letters: %d %s", r.Status, r.Body)
		}
		dl := page.DeadLetters[0]
		if dl.DeadLetterID != rel.DeadLetterID || dl.ID != "c1" || dl.Error != "boom" || dl.Attempts != 2 || dl.Consumer != "w2" {
			t.Errorf("dead letter %+v", dl)
		}
		if r := e.do(ctx, "GET", e.url("/groups/other/dead-letters"), nil); r.Status != 200 || strings.Contains(string(r.Body), "c1") {
			t.Errorf("another group's dead letters: %d %s", r.Status, r.Body)
		}
		r = e.do(ctx, "POST", e.url("/groups/g/dead-letters/"+dl.DeadLetterID+"/requeue"), nil)
		if r.Status != 200 || !strings.Contains(string(r.Body), "stream_id") {
			t.Fatalf("requeue: %d %s", r.Status, r.Body)
		}
		r = e.do(ctx, "POST", e.url("/groups/g/dead-letters/"+dl.DeadLetterID+"/requeue"), nil)
		if p := r.problem(t); r.Status != 404 || p.Type != api.ProblemTypePrefix+api.SlugDeadLetterNotFound {
			t.Fatalf("second requeue: %d %s", r.Status, r.Body)
		}
		back := e.lease(map[string]any{"consumer": "w3"})
		if len(back) != 1 || back[0].ID != "c1" || back[0].Attempt != 1 {
			t.Fatalf("after requeue leased %+v, want c1 as attempt 1", back)
		}
		wantMeta(t, "dead letter of a plain timer", dl.MetaJSON, "", 0, nil, "")

		// A dead letter carries the timer's owner, epoch, labels and
		// deadline, as its delivery did (epoch 1: not the zero value).
		if _, err := e.q.BumpEpoch(ctx, "wf", queue.BumpOptions{}); err != nil {
			t.Fatal(err)
		}
		labels := map[string]string{"tenant": "acme"}
		due := time.Now().Add(-time.Second).UTC().Truncate(time.Millisecond)
		deadline := due.Add(time.Hour).Format("2006-01-02T15:04:05.000Z07:00")
		if _, err := e.q.ScheduleBatch(ctx, []queue.NewTimer{{ID: "m", Due: due, Owner: "wf", Labels: labels, FireWithin: time.Hour}}); err != nil {
			t.Fatal(err)
		}
		if got := e.claimAll(); fmt.Sprint(got) != "[m]" {
			t.Fatalf("claimed %v", got)
		}
		m := e.lease(map[string]any{"consumer": "w4"})
		if len(m) != 1 || m[0].ID != "m" {
			t.Fatalf("leased %+v, want m", m)
		}
		wantMeta(t, "delivery", m[0].MetaJSON, "wf", 1, labels, deadline)
		r = e.do(ctx, "POST", e.url("/groups/g/deliveries/"+m[0].DeliveryID+"/release"), map[string]any{"error": "never", "dead_letter": true})
		if r.Status != 200 || !strings.Contains(string(r.Body), "dead_letter_id") {
			t.Fatalf("release to a dead letter: %d %s", r.Status, r.Body)
		}
		r = e.do(ctx, "GET", e.url("/groups/g/dead-letters"), nil)
		page = decodeAs[struct {
			DeadLetters []api.DeadLetterJSON `json:"dead_letters"`
			NextCursor  string               `json:"next_cursor"`
		}](t, r)
		if r.Status != 200 || len(page.DeadLetters) != 1 || page.DeadLetters[0].ID != "m" {
			t.Fatalf("dead letters: %d %s, want m alone", r.Status, r.Body)
		}
		wantMeta(t, "dead letter", page.DeadLetters[0].MetaJSON, "wf", 1, labels, deadline)
	})
}

// TestConsumeLongPoll: a lease with wait answers with an event fired
// while it waited.
func TestConsumeLongPoll(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		e := newEnv(t, b, api.Options{})
		e.lease(map[string]any{"consumer": "w"}) // creates the group
		done := make(chan []api.DeliveryJSON, 1)
		go func() { done <- e.lease(map[string]any{"consumer": "w", "wait": "20s"}) }()
		e.fire("l", 1)
		select {
		case ds := <-done:
			if len(ds) != 1 || ds[0].ID != "l0" {
				t.Fatalf("long poll leased %+v", ds)
			}
		case <-time.After(15 * time.Second):
			t.Fatal("the long poll did not answer with the event fired while it waited")
		}
	})
}

// TestConsumeGroupStartOverHTTP: a group whose first lease says start
// now gets only the fires after it; by default a new group gets every
// fire kept.
func TestConsumeGroupStartOverHTTP(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		e := newEnv(t, b, api.Options{})
		e.fire("old", 2)
		if ds := e.lease(map[string]any{"consumer": "w", "start": "now"}); len(ds) != 0 {
			t.Fatalf("a group started now leased the old fires %v", ids(ds))
		}
		e.fire("new", 2)
		if ds := e.lease(map[string]any{"consumer": "w", "count": 10}); fmt.Sprint(ids(ds)) != "[new0 new1]" {
			t.Fatalf("a group started now leased %v, want [new0 new1]", ids(ds))
		}
		r := e.do(context.Background(), "POST", e.url("/groups/h/lease"), map[string]any{"consumer": "w", "count": 10})
		if ds := decodeAs[leaseResult](t, r).Deliveries; r.Status != http.StatusOK || fmt.Sprint(ids(ds)) != "[new0 new1 old0 old1]" {
			t.Fatalf("a new group by default leased %d %v, want all four fires", r.Status, ids(ds))
		}
	})
}

// TestConsumeBadInput: each refusal has its status, type and field, and
// changes nothing.
func TestConsumeBadInput(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		e := newEnv(t, b, api.Options{})
		e.fire("b", 1)
		ds := e.lease(map[string]any{"consumer": "w"})
		if len(ds) != 1 {
			t.Fatalf("leased %d", len(ds))
		}
		good := ds[0].DeliveryID
		unknown := queue.DeliveryRef{StreamID: "1-0", Attempt: 1}.String()
		before := e.snapshot()
		cases := []struct {
			name       string
			method     string
			path       string
			body       any
			docInvalid bool
			status     int
			slug       string
			field      string
			detail     string
		}{
			{"no consumer", "POST", "/groups/g/lease", `{}`, true, 400, api.SlugInvalidRequest, "/consumer", "no consumer"},
			{"unknown field", "POST", "/groups/g/lease", `{"consumer": "w", "batch": 3}`, true, 400, api.SlugInvalidRequest, "/batch", `unknown field "batch"`},
			{"bad consumer", "POST", "/groups/g/lease", `{"consumer": "w 1"}`, true, 422, api.SlugInvalidConsumer, "/consumer", "position"},
			{"bad group", "POST", "/groups/g%20x/lease", `{"consumer": "w"}`, true, 422, api.SlugInvalidConsumer, "", "group name"},
			{"count zero", "POST", "/groups/g/lease", `{"consumer": "w", "count": 0}`, true, 422, api.SlugInvalidArgument, "/count", "outside"},
			{"short lease", "POST", "/groups/g/lease", `{"consumer": "w", "lease": "1ms"}`, false, 422, api.SlugInvalidArgument, "/lease", "outside"},
			{"long wait", "POST", "/groups/g/lease", `{"consumer": "w", "wait": "10m"}`, false, 422, api.SlugInvalidArgument, "/wait", "at most"},
			{"bad start", "POST", "/groups/g/lease", `{"consumer": "w", "start": "latest"}`, true, 422, api.SlugInvalidArgument, "/start", `not one of "oldest", "now"`},
			{"garbled delivery", "POST", "/groups/g/ack", map[string]any{"delivery_ids": []string{good, "0-x"}}, false, 422, api.SlugInvalidDeliveryID, "/delivery_ids/1", "as Lease returned"},
			{"no deliveries", "POST", "/groups/g/ack", `{"delivery_ids": []}`, true, 400, api.SlugInvalidRequest, "/delivery_ids", "give 1"},
			{"release unknown", "POST", "/groups/g/deliveries/" + unknown + "/release", nil, false, 404, api.SlugDeliveryNotFound, "", "never handed out"},
			{"release garbled", "POST", "/groups/g/deliveries/zz/release", nil, false, 422, api.SlugInvalidDeliveryID, "", "as Lease returned"},
			{"release delay above lease", "POST", "/groups/g/deliveries/" + good + "/release", `{"delay": "1m"}`, false, 422, api.SlugInvalidArgument, "", "lease"},
			{"requeue garbled", "POST", "/groups/g/dead-letters/1-2/requeue", nil, false, 422, api.SlugInvalidDeadLetter, "", "<shard>-<entry ID>"},
			{"requeue unknown", "POST", "/groups/g/dead-letters/0-1-0/requeue", nil, false, 404, api.SlugDeadLetterNotFound, "", ""},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				rctx := ctx
				if c.docInvalid {
					rctx = expectInvalid(ctx)
				}
				r := e.do(rctx, c.method, e.url(c.path), c.body)
				if r.Status != c.status {
					t.Fatalf("status %d %s, want %d", r.Status, r.Body, c.status)
				}
				p := r.problem(t)
				if p.Type != api.ProblemTypePrefix+c.slug || p.Field != c.field || !strings.Contains(p.Detail, c.detail) || p.Title == "" {
					t.Errorf("problem %+v, want type %s, field %q, detail containing %q", p, c.slug, c.field, c.detail)
				}
				if after := e.snapshot(); after != before {
					t.Errorf("the refused request changed the namespace:\nbefore %s\nafter  %s", before, after)
				}
			})
		}
	})
}
