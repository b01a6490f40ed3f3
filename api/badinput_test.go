package api_test

import (
	"context"
	"encoding/base64"
	"net/http"
	"strings"
	"testing"

	"github.com/timerq/timerq/api"
	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/queue"
)

// TestBadInputIsRefusedAndWritesNothing sends each bad input of issue 22's
// list and checks the status, the problem's type, field and detail, and
// that the namespace is byte for byte as before. Each request also breaks
// the document (expectInvalid) where the document can tell, so the
// contract refuses what the server refuses.
func TestBadInputIsRefusedAndWritesNothing(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		e := newEnv(t, b, api.Options{MaxBodyBytes: 4096, MaxBatch: 3, Queue: queue.Options{MaxPayloadBytes: 1024}})
		ctx := context.Background()
		// Something to leave untouched, in every state.
		for _, id := range []string{"kept", "kept-cancelled"} {
			if r := e.do(ctx, "POST", e.url("/timers"), map[string]any{"id": id, "in": "1h", "payload_text": "p"}); r.Status != http.StatusCreated {
				t.Fatalf("setup: %d %s", r.Status, r.Body)
			}
		}
		if r := e.do(ctx, "POST", e.url("/timers/kept-cancelled/cancel"), nil); r.Status != http.StatusOK {
			t.Fatalf("setup: %d %s", r.Status, r.Body)
		}
		before := e.snapshot()

		long := strings.Repeat("x", 257)
		big := base64.StdEncoding.EncodeToString(make([]byte, 2000))
		cases := []struct {
			name        string
			method, url string
			body        any
			docInvalid  bool // the document refuses it too
			status      int
			slug, field string
			detail      string // a part of the detail
		}{
			{"malformed JSON", "POST", e.url("/timers"), `{"id": "a", "in": "1h"`, true,
				400, api.SlugInvalidRequest, "", "ends in the middle"},
			{"not JSON at all", "POST", e.url("/timers"), `id=a`, true,
				400, api.SlugInvalidRequest, "", "not valid JSON"},
			{"two values", "POST", e.url("/timers"), `{"id": "a", "in": "1h"} {}`, false,
				400, api.SlugInvalidRequest, "", "more than one JSON value"},
			{"an array", "POST", e.url("/timers"), `[]`, true,
				400, api.SlugInvalidRequest, "", "is a JSON array"},
			{"wrong type of id", "POST", e.url("/timers"), `{"id": 7, "in": "1h"}`, true,
				400, api.SlugInvalidRequest, "/id", "is a JSON number, not a string"},
			{"wrong type of in", "POST", e.url("/timers"), `{"id": "a", "in": 60}`, true,
				400, api.SlugInvalidRequest, "/in", "is a JSON number"},
			{"unknown field", "POST", e.url("/timers"), `{"id": "a", "due": "2030-01-01T00:00:00Z"}`, true,
				400, api.SlugInvalidRequest, "/due", `unknown field "due"`},
			{"empty body", "POST", e.url("/timers"), ``, true,
				400, api.SlugInvalidRequest, "", "the body is empty"},
			{"not UTF-8", "POST", e.url("/timers"), []byte("{\"id\": \"a\xff\", \"in\": \"1h\"}"), false,
				400, api.SlugInvalidRequest, "", "not valid UTF-8"},
			{"body over the limit", "POST", e.url("/timers"), `{"id": "a", "in": "1h", "payload_text": "` + strings.Repeat("p", 5000) + `"}`, false,
				413, api.SlugBodyTooLarge, "", "over the limit of 4096 bytes"},
			{"no id", "POST", e.url("/timers"), `{"in": "1h"}`, true,
				400, api.SlugInvalidRequest, "/id", "has no id"},
			{"empty id", "POST", e.url("/timers"), `{"id": "", "in": "1h"}`, true,
				422, api.SlugInvalidID, "/id", "1-256 bytes"},
			{"id too long", "POST", e.url("/timers"), `{"id": "` + long + `", "in": "1h"}`, true,
				422, api.SlugInvalidID, "/id", "1-256 bytes"},
			{"id with a control character", "POST", e.url("/timers"), `{"id": "a\u0007b", "in": "1h"}`, false,
				422, api.SlugInvalidID, "/id", "control"},
			{"occurrence id", "POST", e.url("/timers"), `{"id": "daily@1796238000000", "in": "1h"}`, false,
				422, api.SlugOccurrenceID, "/id", "reserved for occurrences"},
			{"invalid namespace", "POST", e.srv.URL + "/v1/namespaces/no%20spaces/timers", `{"id": "a", "in": "1h"}`, true,
				400, api.SlugInvalidNamespace, "", "1-64 characters"},
			{"due time out of range", "POST", e.url("/timers"), `{"id": "a", "due_at": "10000-01-01T00:00:00Z"}`, false,
				422, api.SlugInvalidDue, "/due_at", "is not a time"},
			{"due time before 1970", "POST", e.url("/timers"), `{"id": "a", "due_at": "1969-12-31T23:59:59Z"}`, false,
				422, api.SlugInvalidDue, "/due_at", "outside 1970-01-01 to 9999-12-31"},
			{"unix seconds as a number", "POST", e.url("/timers"), `{"id": "a", "due_at": 1796238000}`, true,
				400, api.SlugInvalidRequest, "/due_at", `write "1796238000s" for Unix seconds (2026-12-02T19:00:00.000Z) or "1796238000ms"`},
			{"unix seconds as a bare string", "POST", e.url("/timers"), `{"id": "a", "due_at": "1796238000"}`, false,
				422, api.SlugInvalidDue, "/due_at", "is a number without a unit"},
			{"no due time", "POST", e.url("/timers"), `{"id": "a"}`, false,
				400, api.SlugInvalidRequest, "/due_at", "give due_at (a time) or in (a delay)"},
			{"due_at and in", "POST", e.url("/timers"), `{"id": "a", "in": "1h", "due_at": "2030-01-01T00:00:00Z"}`, false,
				400, api.SlugInvalidRequest, "/due_at", "give one"},
			{"negative delay", "POST", e.url("/timers"), `{"id": "a", "in": "-5s"}`, false,
				422, api.SlugInvalidArgument, "/in", "is negative"},
			{"delay not Go syntax", "POST", e.url("/timers"), `{"id": "a", "in": "5 minutes"}`, false,
				422, api.SlugInvalidArgument, "/in", "Go's syntax"},
			{"payload over the limit", "POST", e.url("/timers"), `{"id": "a", "in": "1h", "payload": "` + big + `"}`, false,
				422, api.SlugPayloadTooLarge, "/payload", "2000 bytes, over the limit of 1024"},
			{"payload not base64", "POST", e.url("/timers"), `{"id": "a", "in": "1h", "payload": "not base64!"}`, false,
				400, api.SlugInvalidRequest, "/payload", "not base64"},
			{"payload and payload_text", "POST", e.url("/timers"), `{"id": "a", "in": "1h", "payload": "", "payload_text": ""}`, false,
				400, api.SlugInvalidRequest, "/payload", "give one"},
			{"not JSON media type", "POST", e.url("/timers"), nil, true,
				415, api.SlugUnsupportedMediaType, "", "send JSON"},
			{"batch with one bad item", "POST", e.url("/timers/batch"),
				`{"timers": [{"id": "b1", "in": "1h"}, {"id": "b2", "due_at": "1796238000"}, {"id": "b3", "in": "1h"}]}`, false,
				422, api.SlugInvalidDue, "/timers/1/due_at", "is a number without a unit"},
			{"batch with an unknown field in an item", "POST", e.url("/timers/batch"),
				`{"timers": [{"id": "b1", "in": "1h"}, {"id": "b2", "in": "1h", "paylod": "x"}]}`, true,
				400, api.SlugInvalidRequest, "/timers/1/paylod", `unknown field "paylod"`},
			{"batch with a bad id", "POST", e.url("/timers/batch"),
				`{"timers": [{"id": "b1", "in": "1h"}, {"id": "", "in": "1h"}]}`, true,
				422, api.SlugInvalidID, "/timers/1/id", "1-256 bytes"},
			{"batch with an existing and a bad item", "POST", e.url("/timers/batch"),
				`{"timers": [{"id": "kept", "in": "1h"}, {"id": "b9", "in": "1h"}, {"id": "b10", "in": "forever"}]}`, false,
				422, api.SlugInvalidArgument, "/timers/2/in", "not a duration"},
			{"batch over the limit", "POST", e.url("/timers/batch"),
				`{"timers": [{"id": "b1", "in": "1h"}, {"id": "b2", "in": "1h"}, {"id": "b3", "in": "1h"}, {"id": "b4", "in": "1h"}]}`, false,
				413, api.SlugBatchTooLarge, "/timers", "over the limit of 3"},
			{"empty batch", "POST", e.url("/timers/batch"), `{"timers": []}`, true,
				400, api.SlugInvalidRequest, "/timers", "has no timers"},
			{"reschedule to seconds", "POST", e.url("/timers/kept/reschedule"), `{"due_at": 1796238000}`, true,
				400, api.SlugInvalidRequest, "/due_at", "Unix seconds"},
			{"reschedule a cancelled timer", "POST", e.url("/timers/kept-cancelled/reschedule"), `{"in": "1m"}`, false,
				409, api.SlugCancelled, "", "cancelled"},
			{"reschedule an unknown timer", "POST", e.url("/timers/ghost/reschedule"), `{"in": "1m"}`, false,
				404, api.SlugNotFound, "", "not found"},
			{"fire a cancelled timer", "POST", e.url("/timers/kept-cancelled/fire"), nil, false,
				409, api.SlugCancelled, "", "cancelled"},
			{"list with an unknown parameter", "GET", e.url("/timers?dueFrom=2030-01-01T00:00:00Z"), nil, false,
				400, api.SlugInvalidRequest, "", `unknown query parameter "dueFrom"`},
			{"list from unix seconds", "GET", e.url("/timers?due_from=1796238000"), nil, false,
				422, api.SlugInvalidDue, "", "is a number without a unit"},
			{"list with a bad state", "GET", e.url("/timers?state=done"), nil, true,
				400, api.SlugInvalidRequest, "", "not one of scheduled"},
			{"list with a bad limit", "GET", e.url("/timers?limit=5000"), nil, true,
				400, api.SlugInvalidRequest, "", "from 1 to 1000"},
			{"list with a bad cursor", "GET", e.url("/timers?cursor=garbage"), nil, false,
				422, api.SlugInvalidArgument, "", "cursor"},
			{"namespace with a bad shard count", "PUT", e.srv.URL + "/v1/namespaces/" + e.ns + "-x", `{"shards": 0}`, true,
				422, api.SlugInvalidArgument, "/shards", "outside 1..1024"},
			{"schedule without a spec", "POST", e.url("/schedules"), `{"id": "s"}`, false,
				422, api.SlugInvalidSchedule, "/cron", "no spec"},
			{"schedule with a bad cron", "POST", e.url("/schedules"), `{"id": "s", "cron": "61 * * * *"}`, false,
				422, api.SlugInvalidSchedule, "/cron", ""},
			{"schedule with a bad zone", "POST", e.url("/schedules"), `{"id": "s", "cron": "@daily", "tz": "Mars/Olympus"}`, false,
				422, api.SlugInvalidSchedule, "/tz", "IANA"},
			{"schedule with an unknown field", "POST", e.url("/schedules"), `{"id": "s", "every": "1h", "catchup": "all"}`, true,
				400, api.SlugInvalidRequest, "/catchup", `unknown field "catchup"`},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				rctx := ctx
				if c.docInvalid {
					rctx = expectInvalid(ctx)
				}
				var r resp
				if c.slug == api.SlugUnsupportedMediaType {
					r = e.doRaw(rctx, c.method, c.url, "text/plain", "id=a")
				} else {
					r = e.do(rctx, c.method, c.url, c.body)
				}
				if r.Status != c.status {
					t.Fatalf("status %d %s, want %d", r.Status, r.Body, c.status)
				}
				if ct := r.Header.Get("Content-Type"); ct != api.ProblemContentType {
					t.Errorf("Content-Type %q", ct)
				}
				p := r.problem(t)
				if p.Type != api.ProblemTypePrefix+c.slug || p.Field != c.field || !strings.Contains(p.Detail, c.detail) || p.Status != c.status || p.Title == "" {
					t.Errorf("problem %+v, want type %s, field %q, detail containing %q", p, c.slug, c.field, c.detail)
				}
				if after := e.snapshot(); after != before {
					t.Errorf("the refused request changed the namespace:\nbefore %s\nafter  %s", before, after)
				}
			})
		}
	})
}
