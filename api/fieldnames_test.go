package api_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/timerq/timerq/api"
	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/queue"
)

// TestQueueRefusalsNameTheJSONField: the queue checks a timer's, a
// schedule's and a debounce call's values once (payload size, flow key,
// endpoint name, timer URL, a schedule's spec and policies), and the API
// names the JSON field it refused (through queue.FieldError and the
// API's one table), in a batch the item's, with the status, type and
// detail of the refusal; nothing is written.
func TestQueueRefusalsNameTheJSONField(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		e := newEnv(t, b, api.Options{Queue: queue.Options{MaxPayloadBytes: 16}})
		ctx := context.Background()
		if r := e.do(ctx, "PUT", e.url("/endpoints/billing"), billingBody()); r.Status != http.StatusCreated {
			t.Fatalf("put endpoint = %d %s", r.Status, r.Body)
		}
		before := e.snapshot()
		big := strings.Repeat("p", 17)
		okItem := map[string]any{"id": "ok", "in": "1h"}
		deliver := func(endpoint, url string) map[string]any {
			d := map[string]any{"endpoint": endpoint}
			if url != "" {
				d["url"] = url
			}
			return d
		}
		sched := func(k string, v any) map[string]any { return map[string]any{"id": "s", "every": "1h", k: v} }
		due := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
		beforeDue := time.Now().Add(time.Minute).UTC().Format(time.RFC3339)
		manyLabels := map[string]any{}
		for i := range queue.MaxLabels + 1 {
			manyLabels[fmt.Sprint("k", i)] = "v"
		}
		cases := []struct {
			name, method, path string
			body               map[string]any
			docInvalid         bool // the document refuses it too
			status             int
			slug, field, want  string
		}{
			// Payload size: POST /timers, a batch item, a schedule, debounce.
			{"timer payload", "POST", "/timers", map[string]any{"id": "a", "in": "1h", "payload_text": big}, false,
				422, api.SlugPayloadTooLarge, "/payload_text", "17 bytes of payload, over the limit of 16"},
			{"timer payload base64", "POST", "/timers", map[string]any{"id": "a", "in": "1h", "payload": "cHBwcHBwcHBwcHBwcHBwcHA="}, false,
				422, api.SlugPayloadTooLarge, "/payload", "over the limit of 16"},
			{"batch item payload", "POST", "/timers/batch", map[string]any{"timers": []any{okItem, map[string]any{"id": "b", "in": "1h", "payload_text": big}}}, false,
				422, api.SlugPayloadTooLarge, "/timers/1/payload_text", "over the limit of 16"},
			{"schedule payload", "POST", "/schedules", sched("payload_text", big), false,
				422, api.SlugPayloadTooLarge, "/payload_text", "17 bytes of payload, over the limit of 16"},
			{"debounce payload", "POST", "/debounce/k", map[string]any{"delay": "1s", "max_wait": "1m", "payload_text": big}, false,
				422, api.SlugPayloadTooLarge, "/payload_text", "over the limit of 16"},
			// Flow keys.
			{"timer flow key", "POST", "/timers", map[string]any{"id": "a", "in": "1h", "flow_key": "bad\u0001key"}, false,
				422, api.SlugInvalidArgument, "/flow_key", "control character"},
			{"batch item flow key", "POST", "/timers/batch", map[string]any{"timers": []any{okItem, okItem, map[string]any{"id": "c", "in": "1h", "flow_key": "bad\u0001key"}}}, false,
				422, api.SlugInvalidArgument, "/timers/2/flow_key", "control character"},
			{"schedule flow key", "POST", "/schedules", sched("flow_key", "bad\u0001key"), false,
				422, api.SlugInvalidArgument, "/flow_key", "control character"},
			{"empty flow key", "POST", "/timers", map[string]any{"id": "a", "in": "1h", "flow_key": ""}, true,
				422, api.SlugInvalidArgument, "/flow_key", "flow_key is empty"},
			// Endpoint names.
			{"timer endpoint name", "POST", "/timers", map[string]any{"id": "a", "in": "1h", "deliver": deliver("bill ing", "")}, true,
				422, api.SlugInvalidEndpoint, "/deliver/endpoint", `name "bill ing" has ' '`},
			{"batch item endpoint name", "POST", "/timers/batch", map[string]any{"timers": []any{okItem, map[string]any{"id": "b", "in": "1h", "deliver": deliver("bill ing", "")}}}, true,
				422, api.SlugInvalidEndpoint, "/timers/1/deliver/endpoint", "use letters, digits"},
			{"schedule endpoint name", "POST", "/schedules", sched("deliver", deliver("bill ing", "")), true,
				422, api.SlugInvalidEndpoint, "/deliver/endpoint", "use letters, digits"},
			{"debounce endpoint name", "POST", "/debounce/k", map[string]any{"delay": "1s", "max_wait": "1m", "deliver": deliver("bill ing", "")}, true,
				422, api.SlugInvalidEndpoint, "/deliver/endpoint", "use letters, digits"},
			{"empty endpoint name", "POST", "/timers", map[string]any{"id": "a", "in": "1h", "deliver": deliver("", "")}, true,
				422, api.SlugInvalidEndpoint, "/deliver/endpoint", "deliver.endpoint is empty"},
			// Timer URLs.
			{"timer URL", "POST", "/timers", map[string]any{"id": "a", "in": "1h", "deliver": deliver("billing", "ftp://hooks.example.com/")}, false,
				422, api.SlugInvalidArgument, "/deliver/url", "scheme"},
			{"batch item URL", "POST", "/timers/batch", map[string]any{"timers": []any{okItem, map[string]any{"id": "b", "in": "1h", "deliver": deliver("billing", "http://10.1.2.3/")}}}, false,
				422, api.SlugInvalidArgument, "/timers/1/deliver/url", "10.0.0.0/8"},
			{"schedule URL", "POST", "/schedules", sched("deliver", deliver("billing", "https://u:p@hooks.example.com/")), false,
				422, api.SlugInvalidArgument, "/deliver/url", "user information"},
			{"empty URL", "POST", "/timers", map[string]any{"id": "a", "in": "1h", "deliver": map[string]any{"endpoint": "billing", "url": ""}}, false,
				422, api.SlugInvalidArgument, "/deliver/url", "deliver.url is empty"},
			// A schedule's spec and policies.
			{"bad cron", "POST", "/schedules", map[string]any{"id": "s", "cron": "61 * * * *"}, false,
				422, api.SlugInvalidSchedule, "/cron", "61"},
			{"empty cron", "POST", "/schedules", map[string]any{"id": "s", "cron": ""}, false,
				422, api.SlugInvalidSchedule, "/cron", "cron is empty"},
			{"interval below 1ms", "POST", "/schedules", map[string]any{"id": "s", "every": "500us"}, false,
				422, api.SlugInvalidSchedule, "/every", "below 1ms"},
			{"zero interval", "POST", "/schedules", map[string]any{"id": "s", "every": "0s"}, false,
				422, api.SlugInvalidSchedule, "/every", "is zero"},
			{"update with a bad cron", "PUT", "/schedules/s", map[string]any{"cron": "* * *"}, false,
				422, api.SlugInvalidSchedule, "/cron", "cron spec"},
			{"negative catch-up limit", "POST", "/schedules", sched("catch_up_limit", -1), true,
				422, api.SlugInvalidSchedule, "/catch_up_limit", "is negative"},
			{"ahead over the limit", "POST", "/schedules", sched("ahead", 101), true,
				422, api.SlugInvalidSchedule, "/ahead", "outside 1..100"},
			{"negative max count", "POST", "/schedules", sched("max_count", -1), true,
				422, api.SlugInvalidSchedule, "/max_count", "is negative"},
			{"schedule ID too long", "POST", "/schedules", map[string]any{"id": strings.Repeat("s", 241), "every": "1h"}, true,
				422, api.SlugInvalidID, "/id", "at most 240"},
			{"schedule ID of the path", "PUT", "/schedules/" + strings.Repeat("s", 241), map[string]any{"every": "1h"}, false,
				422, api.SlugInvalidID, "", "at most 240"},
			// Owners, labels, epochs and deadlines.
			{"timer owner", "POST", "/timers", map[string]any{"id": "a", "in": "1h", "owner": "bad\u0001owner"}, false,
				422, api.SlugInvalidArgument, "/owner", "control character"},
			{"empty owner", "POST", "/timers", map[string]any{"id": "a", "in": "1h", "owner": ""}, true,
				422, api.SlugInvalidArgument, "/owner", "owner is empty"},
			{"batch item labels", "POST", "/timers/batch", map[string]any{"timers": []any{okItem, map[string]any{"id": "b", "in": "1h", "labels": map[string]any{"k": "v\u0001"}}}}, false,
				422, api.SlugInvalidArgument, "/timers/1/labels", "control character"},
			{"label key", "POST", "/timers", map[string]any{"id": "a", "in": "1h", "labels": map[string]any{"bad key": "v"}}, true,
				422, api.SlugInvalidArgument, "/labels", `label key "bad key"`},
			{"too many labels", "POST", "/timers", map[string]any{"id": "a", "in": "1h", "labels": manyLabels}, true,
				422, api.SlugInvalidArgument, "/labels", "17 labels"},
			{"epoch without owner", "POST", "/timers", map[string]any{"id": "a", "in": "1h", "epoch": 3}, false,
				422, api.SlugInvalidArgument, "/epoch", "an epoch is an owner's"},
			{"deadline before due", "POST", "/timers", map[string]any{"id": "a", "due_at": due, "fire_by": beforeDue}, false,
				422, api.SlugInvalidArgument, "/fire_by", "before the due time"},
			{"batch item deadline", "POST", "/timers/batch", map[string]any{"timers": []any{okItem, okItem, map[string]any{"id": "c", "due_at": due, "fire_by": beforeDue}}}, false,
				422, api.SlugInvalidArgument, "/timers/2/fire_by", "before the due time"},
			{"deadline not a time", "POST", "/timers", map[string]any{"id": "a", "in": "1h", "fire_by": "tomorrow"}, false,
				422, api.SlugInvalidDue, "/fire_by", `fire_by "tomorrow"`},
			{"zero fire_within_ms", "POST", "/timers", map[string]any{"id": "a", "in": "1h", "fire_within_ms": 0}, true,
				422, api.SlugInvalidArgument, "/fire_within_ms", "outside 1.."},
			{"both deadlines", "POST", "/timers", map[string]any{"id": "a", "in": "1h", "fire_within_ms": 1000, "fire_by": due}, false,
				400, api.SlugInvalidRequest, "/fire_by", "both fire_within_ms and fire_by"},
			// Debounce's delays.
			{"debounce delay", "POST", "/debounce/k", map[string]any{"delay": "0s", "max_wait": "1m"}, false,
				422, api.SlugInvalidArgument, "/delay", "use a positive delay"},
			{"debounce max wait", "POST", "/debounce/k", map[string]any{"delay": "1m", "max_wait": "1s"}, false,
				422, api.SlugInvalidArgument, "/max_wait", "shorter than the delay"},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				rctx := ctx
				if c.docInvalid {
					rctx = expectInvalid(ctx)
				}
				r := e.do(rctx, c.method, e.url(c.path), c.body)
				p := r.problem(t)
				if r.Status != c.status || p.Type != api.ProblemTypePrefix+c.slug || p.Field != c.field || !strings.Contains(p.Detail, c.want) {
					t.Errorf("%d %s at %q: %s; want %d %s at %q saying %q", r.Status, p.Type, p.Field, p.Detail, c.status, c.slug, c.field, c.want)
				}
				if strings.Contains(p.Detail, "Options.MaxPayloadBytes") || strings.Contains(p.Detail, "batch item") {
					t.Errorf("detail %q names the Go option or the batch item", p.Detail)
				}
			})
		}
		if after := e.snapshot(); after != before {
			t.Errorf("refused requests wrote:\nbefore %s\nafter  %s", before, after)
		}
	})
}
