package api_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/timerq/timerq/api"
	"github.com/timerq/timerq/internal/keyspace"
	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/internal/timefmt"
	"github.com/timerq/timerq/queue"
)

// TestDebounceRoute: the three outcomes through the HTTP API, each with
// its status, and the window's timer found again under its ID.
func TestDebounceRoute(t *testing.T) {
	redistest.ForEachAll(t, func(t *testing.T, b *redistest.Backend) {
		e := newEnv(t, b, api.Options{})
		ctx := context.Background()
		key := "cart/7 ü"
		r := e.do(ctx, "POST", e.url("/debounce/"+pathID(key)), map[string]any{"delay": "1h", "max_wait": "2h", "payload_text": "a"})
		if r.Status != http.StatusCreated {
			t.Fatalf("first call = %d %s, want 201", r.Status, r.Body)
		}
		first := decodeAs[api.DebounceResultJSON](t, r)
		now, err := timefmt.Parse(first.Now)
		if err != nil {
			t.Fatal(err)
		}
		if first.Outcome != "created" || first.Timer.ID != queue.DebounceID(key, now.UnixMilli()) || string(first.Timer.Payload) != "a" {
			t.Fatalf("first call answered %+v", first)
		}
		if first.DeadlineAt != timefmt.Format(now.Add(2*time.Hour)) {
			t.Errorf("deadline_at %s, want %s", first.DeadlineAt, timefmt.Format(now.Add(2*time.Hour)))
		}

		redistest.AwaitServerTime(t, b.Client, now.Add(2*time.Millisecond))
		r = e.do(ctx, "POST", e.url("/debounce/"+pathID(key)), map[string]any{"delay": "1h", "max_wait": "2h", "payload_text": "b"})
		pushed := decodeAs[api.DebounceResultJSON](t, r)
		if r.Status != http.StatusOK || pushed.Outcome != "pushed" || pushed.Timer.ID != first.Timer.ID || pushed.Timer.DueAt <= first.Timer.DueAt {
			t.Fatalf("second call = %d %+v, want 200 pushed, later than %s", r.Status, pushed, first.Timer.DueAt)
		}
		r = e.do(ctx, "POST", e.url("/debounce/"+pathID(key)), map[string]any{"delay": "3h", "max_wait": "3h", "payload_text": "c", "keep_first": true})
		capped := decodeAs[api.DebounceResultJSON](t, r)
		if r.Status != http.StatusOK || capped.Outcome != "capped" || capped.Timer.DueAt != first.DeadlineAt || string(capped.Timer.Payload) != "b" {
			t.Fatalf("third call = %d %+v, want 200 capped at %s with the payload left as it was", r.Status, capped, first.DeadlineAt)
		}
		r = e.do(ctx, "GET", e.url("/timers/"+pathID(first.Timer.ID)), nil)
		if got := r.timer(t); r.Status != http.StatusOK || got.DueAt != first.DeadlineAt || string(got.Payload) != "b" {
			t.Fatalf("get = %d %s", r.Status, r.Body)
		}

		// deliver names the endpoint the window's fire goes to.
		if _, err := e.q.Endpoints().Put(ctx, queue.Endpoint{Name: "billing", URL: "https://billing.example.com/",
			Secrets: []queue.Secret{queue.Secret(queue.SecretPrefix + "QUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUE=")}}, nil); err != nil {
			t.Fatal(err)
		}
		r = e.do(ctx, "POST", e.url("/debounce/inv-1"), map[string]any{"delay": "1h", "max_wait": "2h", "deliver": map[string]any{"endpoint": "billing"}})
		if r.Status != http.StatusCreated {
			t.Fatalf("debounce with deliver = %d %s, want 201", r.Status, r.Body)
		}
		id := decodeAs[api.DebounceResultJSON](t, r).Timer.ID
		k, err := e.q.Inspect().ShardOf(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		n, err := e.q.Inspect().Shards(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if ep, err := b.Client.HGet(ctx, keyspace.Shard(e.q.Namespace(), k, n).Deliveries(), id).Result(); err != nil || ep != "billing" {
			t.Fatalf("the window's timer delivers to %q (%v), want billing", ep, err)
		}
	})
}

// TestDebounceRouteRefusesBadInput: each bad request is a problem naming
// its field, and writes nothing.
func TestDebounceRouteRefusesBadInput(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		e := newEnv(t, b, api.Options{})
		ctx := context.Background()
		if _, _, err := e.q.Recurring().Put(ctx, queue.Recurring{ID: "nightly", Every: time.Hour}); err != nil {
			t.Fatal(err)
		}
		before := e.snapshot()
		for _, c := range []struct {
			name    string
			key     string
			body    any
			invalid bool // the contract refuses it too
			status  int
			slug    string
			field   string
		}{
			{"no delay", "k", map[string]any{"max_wait": "1m"}, true, 400, api.SlugInvalidRequest, "/delay"},
			{"no max wait", "k", map[string]any{"delay": "1s"}, true, 400, api.SlugInvalidRequest, "/max_wait"},
			{"unknown field", "k", map[string]any{"delay": "1s", "max_wait": "1m", "due_at": "1s"}, true, 400, api.SlugInvalidRequest, "/due_at"},
			{"zero delay", "k", map[string]any{"delay": "0s", "max_wait": "1m"}, false, 422, api.SlugInvalidArgument, "/delay"},
			{"negative delay", "k", map[string]any{"delay": "-1s", "max_wait": "1m"}, false, 422, api.SlugInvalidArgument, "/delay"},
			{"not a duration", "k", map[string]any{"delay": "soon", "max_wait": "1m"}, false, 422, api.SlugInvalidArgument, "/delay"},
			{"max wait below delay", "k", map[string]any{"delay": "1m", "max_wait": "1s"}, false, 422, api.SlugInvalidArgument, "/max_wait"},
			{"absurd max wait", "k", map[string]any{"delay": "1s", "max_wait": "9000h"}, false, 422, api.SlugInvalidArgument, "/max_wait"},
			{"both payloads", "k", map[string]any{"delay": "1s", "max_wait": "1m", "payload": "", "payload_text": "x"}, false, 400, api.SlugInvalidRequest, "/payload"},
			{"a schedule's ID", "nightly", map[string]any{"delay": "1s", "max_wait": "1m"}, false, 422, api.SlugInvalidID, ""},
			{"deliver without an endpoint", "k", map[string]any{"delay": "1s", "max_wait": "1m", "deliver": map[string]any{}}, true, 400, api.SlugInvalidRequest, "/deliver/endpoint"},
			{"a missing endpoint", "k", map[string]any{"delay": "1s", "max_wait": "1m", "deliver": map[string]any{"endpoint": "billing"}}, false, 422, api.SlugUnknownEndpoint, "/deliver/endpoint"},
		} {
			rctx := ctx
			if c.invalid {
				rctx = expectInvalid(ctx)
			}
			r := e.do(rctx, "POST", e.url("/debounce/"+c.key), c.body)
			p := r.problem(t)
			if r.Status != c.status || p.Type != api.ProblemTypePrefix+c.slug || p.Field != c.field {
				t.Errorf("%s: %d %s field %q, want %d %s field %q: %s", c.name, r.Status, p.Type, p.Field, c.status, c.slug, c.field, p.Detail)
			}
			if c.slug == api.SlugUnknownEndpoint {
				oneCause(t, p.Detail)
			}
		}
		if after := e.snapshot(); after != before {
			t.Errorf("refused requests wrote:\nbefore:\n%s\nafter:\n%s", before, after)
		}
	})
}
