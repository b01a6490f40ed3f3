package api_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/timerq/timerq/api"
	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/queue"
)

// TestCreateIsIdempotent: the first create answers 201 with the timer, a
// second with the same ID 200 with the existing timer, unchanged.
func TestCreateIsIdempotent(t *testing.T) {
	redistest.ForEachAll(t, func(t *testing.T, b *redistest.Backend) {
		e := newEnv(t, b, api.Options{})
		ctx := context.Background()
		due := time.Now().Add(time.Hour).UTC().Truncate(time.Millisecond)
		r := e.do(ctx, "POST", e.url("/timers"), map[string]any{"id": "order-42", "due_at": due.Format(time.RFC3339Nano), "payload_text": "hello"})
		if r.Status != http.StatusCreated {
			t.Fatalf("first create = %d %s, want 201", r.Status, r.Body)
		}
		got := r.timer(t)
		if got.ID != "order-42" || got.State != "scheduled" || string(got.Payload) != "hello" || got.Created == nil || !*got.Created {
			t.Fatalf("first create answered %+v", got)
		}
		if got.DueAt != due.Format("2006-01-02T15:04:05.000Z07:00") {
			t.Fatalf("due_at = %s, want %s", got.DueAt, due)
		}
		r = e.do(ctx, "POST", e.url("/timers"), map[string]any{"id": "order-42", "in": "5s", "payload": base64.StdEncoding.EncodeToString([]byte("other"))})
		if r.Status != http.StatusOK {
			t.Fatalf("second create = %d %s, want 200", r.Status, r.Body)
		}
		again := r.timer(t)
		if again.DueAt != got.DueAt || string(again.Payload) != "hello" || again.Created == nil || *again.Created {
			t.Fatalf("second create answered %+v, want the first timer unchanged with created false", again)
		}
		tm, err := e.q.Get(ctx, "order-42")
		if err != nil || !tm.Due.Equal(due) || string(tm.Payload) != "hello" {
			t.Fatalf("in Redis: %+v, %v", tm, err)
		}
		r = e.do(ctx, "GET", e.url("/timers/order-42"), nil)
		if r.Status != http.StatusOK || r.timer(t).ID != "order-42" || r.timer(t).Created != nil {
			t.Fatalf("get = %d %s", r.Status, r.Body)
		}
	})
}

// TestIDRoundTripsThroughThePath: an ID with '/', spaces, non-ASCII and
// URL syntax is created from the body and found again in the path,
// percent-encoded.
func TestIDRoundTripsThroughThePath(t *testing.T) {
	redistest.ForEachAll(t, func(t *testing.T, b *redistest.Backend) {
		e := newEnv(t, b, api.Options{})
		ctx := context.Background()
		for _, id := range []string{"a/b c/ü", "x?y#z%2F", "..", "/lead", "日本/..//end"} {
			r := e.do(ctx, "POST", e.url("/timers"), map[string]any{"id": id, "in": "1h"})
			if r.Status != http.StatusCreated {
				t.Fatalf("create %q = %d %s", id, r.Status, r.Body)
			}
			r = e.do(ctx, "GET", e.url("/timers/"+pathID(id)), nil)
			if r.Status != http.StatusOK || r.timer(t).ID != id {
				t.Fatalf("get %q = %d %s", id, r.Status, r.Body)
			}
			r = e.do(ctx, "POST", e.url("/timers/"+pathID(id)+"/cancel"), nil)
			if r.Status != http.StatusOK || r.timer(t).State != "cancelled" {
				t.Fatalf("cancel %q = %d %s", id, r.Status, r.Body)
			}
		}
	})
}

// pathID is id as a path segment: percent-encoded, and a "." or ".." as
// %2E or %2E%2E, since clients drop dot segments (RFC 3986, 5.2.4).
func pathID(id string) string {
	s := url.PathEscape(id)
	if strings.Trim(s, ".") == "" {
		return strings.ReplaceAll(s, ".", "%2E")
	}
	return s
}

// claimAll fires every due timer of e's namespace, as a worker would.
func (e *env) claimAll() []string {
	e.t.Helper()
	var ids []string
	for {
		res, err := e.q.Engine().Claim(context.Background(), queue.MaxBatch)
		if err != nil {
			e.t.Fatalf("Claim: %v", err)
		}
		for _, f := range res.Fired {
			ids = append(ids, f.ID)
		}
		if len(res.Fired) < queue.MaxBatch {
			return ids
		}
	}
}

// TestTimerLifecycle walks a timer through list, reschedule, fire now and
// cancel, with the conflicts each state gives.
func TestTimerLifecycle(t *testing.T) {
	redistest.ForEachAll(t, func(t *testing.T, b *redistest.Backend) {
		e := newEnv(t, b, api.Options{})
		ctx := context.Background()
		base := time.Now().Add(time.Hour).UTC().Truncate(time.Millisecond)
		var batch []map[string]any
		for i := range 7 {
			batch = append(batch, map[string]any{"id": fmt.Sprint("t", i), "due_at": base.Add(time.Duration(i) * time.Minute).Format(time.RFC3339Nano)})
		}
		batch = append(batch, map[string]any{"id": "t0", "in": "1s"}) // a repeat: created once
		r := e.do(ctx, "POST", e.url("/timers/batch"), map[string]any{"timers": batch})
		if r.Status != http.StatusOK {
			t.Fatalf("batch = %d %s", r.Status, r.Body)
		}
		var res struct{ Timers []api.TimerJSON }
		if err := json.Unmarshal(r.Body, &res); err != nil || len(res.Timers) != 8 {
			t.Fatalf("batch answered %s (%v)", r.Body, err)
		}
		for i, tm := range res.Timers {
			if want := i < 7; *tm.Created != want {
				t.Errorf("batch item %d created = %v, want %v", i, *tm.Created, want)
			}
		}

		// Paging with filters, as timerctl list pages.
		var seen []string
		cursor := ""
		for range 10 {
			u := e.url("/timers?state=scheduled&limit=2&due_to=" + url.QueryEscape(base.Add(5*time.Minute).Format(time.RFC3339Nano)))
			if cursor != "" {
				u += "&cursor=" + url.QueryEscape(cursor)
			}
			r := e.do(ctx, "GET", u, nil)
			if r.Status != http.StatusOK {
				t.Fatalf("list = %d %s", r.Status, r.Body)
			}
			var page struct {
				Timers     []api.TimerJSON
				NextCursor string `json:"next_cursor"`
			}
			if err := json.Unmarshal(r.Body, &page); err != nil || len(page.Timers) > 2 {
				t.Fatalf("page %s (%v)", r.Body, err)
			}
			for _, tm := range page.Timers {
				seen = append(seen, tm.ID)
			}
			if cursor = page.NextCursor; cursor == "" {
				break
			}
		}
		if got := strings.Join(seen, ","); got != "t0,t1,t2,t3,t4,t5" {
			t.Fatalf("listed %s, want t0..t5 in due order", got)
		}

		// Reschedule by time and by delay.
		newDue := base.Add(-30 * time.Minute)
		r = e.do(ctx, "POST", e.url("/timers/t1/reschedule"), map[string]any{"due_at": newDue.Format(time.RFC3339Nano)})
		if r.Status != http.StatusOK || r.timer(t).DueAt != newDue.Format("2006-01-02T15:04:05.000Z07:00") {
			t.Fatalf("reschedule = %d %s", r.Status, r.Body)
		}
		r = e.do(ctx, "POST", e.url("/timers/t2/reschedule"), map[string]any{"in": "2h"})
		if tm, err := e.q.Get(ctx, "t2"); r.Status != http.StatusOK || err != nil || tm.Due.Before(time.Now().Add(119*time.Minute)) {
			t.Fatalf("reschedule in 2h = %d %s; in Redis %v, %v", r.Status, r.Body, tm.Due, err)
		}

		// Fire now, then the fired timer refuses changes.
		r = e.do(ctx, "POST", e.url("/timers/t3/fire"), nil)
		if r.Status != http.StatusOK {
			t.Fatalf("fire = %d %s", r.Status, r.Body)
		}
		redistest.AwaitServerTime(t, b.Client, time.Now())
		if fired := e.claimAll(); strings.Join(fired, ",") != "t3" {
			t.Fatalf("claimed %v, want t3", fired)
		}
		r = e.do(ctx, "GET", e.url("/timers/t3"), nil)
		if tm := r.timer(t); tm.State != "fired" || tm.FiredAt == nil {
			t.Fatalf("fired timer = %s", r.Body)
		}
		for _, op := range []string{"cancel", "fire"} {
			r = e.do(ctx, "POST", e.url("/timers/t3/"+op), nil)
			if p := r.problem(t); r.Status != http.StatusConflict || p.Type != api.ProblemTypePrefix+api.SlugAlreadyFired || !strings.Contains(p.Detail, "another ID") {
				t.Fatalf("%s of a fired timer = %d %s", op, r.Status, r.Body)
			}
		}

		// Cancel, twice: the second changes nothing.
		for range 2 {
			r = e.do(ctx, "POST", e.url("/timers/t4/cancel"), nil)
			if tm := r.timer(t); r.Status != http.StatusOK || tm.State != "cancelled" || tm.CancelledAt == nil {
				t.Fatalf("cancel = %d %s", r.Status, r.Body)
			}
		}

		r = e.do(ctx, "GET", e.url("/timers/ghost"), nil)
		if p := r.problem(t); r.Status != http.StatusNotFound || p.Type != api.ProblemTypePrefix+api.SlugNotFound {
			t.Fatalf("get unknown = %d %s", r.Status, r.Body)
		}
	})
}

// TestWaitLongPoll: a wait answers at once for a settled timer, on the
// fire for a pending one, and with the timer still scheduled when its
// timeout passes.
func TestWaitLongPoll(t *testing.T) {
	redistest.ForEachAll(t, func(t *testing.T, b *redistest.Backend) {
		e := newEnv(t, b, api.Options{})
		ctx := context.Background()
		for _, id := range []string{"done", "gone", "later"} {
			if r := e.do(ctx, "POST", e.url("/timers"), map[string]any{"id": id, "in": "1h"}); r.Status != http.StatusCreated {
				t.Fatal(r.Status, string(r.Body))
			}
		}
		e.do(ctx, "POST", e.url("/timers/done/fire"), nil)
		e.do(ctx, "POST", e.url("/timers/gone/cancel"), nil)
		redistest.AwaitServerTime(t, b.Client, time.Now())
		e.claimAll()

		for id, state := range map[string]string{"done": "fired", "gone": "cancelled"} {
			r := e.do(ctx, "GET", e.url("/timers/"+id+"/wait?timeout=50s"), nil)
			if r.Status != http.StatusOK || r.timer(t).State != state {
				t.Fatalf("wait for %s = %d %s, want %s at once", id, r.Status, r.Body, state)
			}
		}
		r := e.do(ctx, "GET", e.url("/timers/later/wait?timeout=20ms"), nil)
		if r.Status != http.StatusOK || r.timer(t).State != "scheduled" {
			t.Fatalf("wait past its timeout = %d %s, want the timer still scheduled", r.Status, r.Body)
		}
		r = e.do(ctx, "GET", e.url("/timers/ghost/wait?timeout=1s"), nil)
		if r.Status != http.StatusNotFound {
			t.Fatalf("wait for an unknown timer = %d %s", r.Status, r.Body)
		}
		r = e.do(ctx, "GET", e.url("/timers/later/wait?timeout=2h"), nil)
		if p := r.problem(t); r.Status != http.StatusBadRequest || !strings.Contains(p.Detail, "at most 55s") {
			t.Fatalf("wait longer than MaxWait = %d %s", r.Status, r.Body)
		}

		got := make(chan resp, 1)
		go func() { got <- e.do(ctx, "GET", e.url("/timers/later/wait?timeout=50s"), nil) }()
		// The wait is in place once the handler's queue subscribed to the
		// timer's channel (classic pub/sub; on a Cluster, where it is
		// sharded, the wait may also begin after the fire: both answer
		// fired).
		if b.Cluster == nil {
			redistest.Eventually(t, 5*time.Second, "the wait's subscription", func() bool {
				n, err := b.Client.PubSubNumSub(ctx, e.q.Keys().Timer("later")).Result()
				return err == nil && n[e.q.Keys().Timer("later")] > 0
			})
		}
		select {
		case r := <-got:
			t.Fatalf("the wait answered before the fire: %d %s", r.Status, r.Body)
		default:
		}
		e.do(ctx, "POST", e.url("/timers/later/fire"), nil)
		redistest.AwaitServerTime(t, b.Client, time.Now())
		e.claimAll()
		r = <-got
		if tm := r.timer(t); r.Status != http.StatusOK || tm.State != "fired" {
			t.Fatalf("wait on fire = %d %s", r.Status, r.Body)
		}
	})
}

// TestHeldRequestsAreCapped: a wait beyond MaxHeldPerClient is refused at
// once with 503 and Retry-After, naming the setting that raises the cap,
// and a slot frees when a wait ends.
func TestHeldRequestsAreCapped(t *testing.T) {
	_, rdb := redistest.Mini(t)
	b := &redistest.Backend{Name: "mini", Client: rdb}
	e := newEnv(t, b, api.Options{MaxHeldPerClient: 1, MaxHeldPerClientSetting: "--api-max-held-per-client"})
	ctx := context.Background()
	if r := e.do(ctx, "POST", e.url("/timers"), map[string]any{"id": "w", "in": "1h"}); r.Status != http.StatusCreated {
		t.Fatal(r.Status, string(r.Body))
	}
	first := make(chan resp, 1)
	go func() { first <- e.do(ctx, "GET", e.url("/timers/w/wait?timeout=50s"), nil) }()
	redistest.Eventually(t, 5*time.Second, "the first wait's subscription", func() bool {
		n, err := rdb.PubSubNumSub(ctx, e.q.Keys().Timer("w")).Result()
		return err == nil && n[e.q.Keys().Timer("w")] > 0
	})
	r := e.do(ctx, "GET", e.url("/timers/w/wait?timeout=50s"), nil)
	if p := r.problem(t); r.Status != http.StatusServiceUnavailable || p.Type != api.ProblemTypePrefix+api.SlugTooManyHeld ||
		r.Header.Get("Retry-After") == "" || !strings.Contains(p.Detail, "--api-max-held-per-client") {
		t.Fatalf("a second wait = %d %v %s", r.Status, r.Header, r.Body)
	}
	e.do(ctx, "POST", e.url("/timers/w/cancel"), nil)
	if r := <-first; r.Status != http.StatusOK || r.timer(t).State != "cancelled" {
		t.Fatalf("the first wait = %d %s", r.Status, r.Body)
	}
	if r := e.do(ctx, "GET", e.url("/timers/w/wait?timeout=1s"), nil); r.Status != http.StatusOK {
		t.Fatalf("a wait after the first ended = %d %s", r.Status, r.Body)
	}
}
