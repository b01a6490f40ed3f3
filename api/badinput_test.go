package api_test

import (
	"context"
	"encoding/base64"
	"net/http"
	"strings"
	"testing"
	"time"

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
		// Before a due time "in" resolves by the server's clock.
		soon := time.Now().Add(time.Minute).UTC().Format(time.RFC3339Nano)
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
				422, api.SlugPayloadTooLarge, "/payload", "2000 bytes of payload, over the limit of 1024"},
			{"payload not base64", "POST", e.url("/timers"), `{"id": "a", "in": "1h", "payload": "not base64!"}`, false,
				400, api.SlugInvalidRequest, "/payload", "not base64"},
			{"payload and payload_text", "POST", e.url("/timers"), `{"id": "a", "in": "1h", "payload": "", "payload_text": ""}`, false,
				400, api.SlugInvalidRequest, "/payload", "give one"},
			{"fire_by before a relative due time", "POST", e.url("/timers"), `{"id": "a", "in": "1h", "fire_by": "` + soon + `"}`, false,
				422, api.SlugInvalidArgument, "/fire_by", "before the due time"},
			{"batch item with fire_by before its relative due time", "POST", e.url("/timers/batch"),
				`{"timers": [{"id": "b1", "in": "1h"}, {"id": "b2", "in": "1h", "owner": "wf", "fire_by": "` + soon + `"}]}`, false,
				422, api.SlugInvalidArgument, "/timers/1/fire_by", "before the due time"},
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
			{"batch with an occurrence id", "POST", e.url("/timers/batch"),
				`{"timers": [{"id": "b1", "in": "1h"}, {"id": "b2", "in": "1h"}, {"id": "daily@1796238000000", "in": "1h"}]}`, false,
				422, api.SlugOccurrenceID, "/timers/2/id", "reserved for occurrences"},
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
			// A filter field given empty would select more, not fewer: every
			// owner's timers of the prefix ("kept" has no owner), every ID
			// of the owner, every epoch.
			{"bulk cancel with an empty owner", "POST", e.url("/timers/cancel"), `{"id_prefix": "k", "owner": ""}`, true,
				422, api.SlugInvalidArgument, "/owner", "owner is empty"},
			{"bulk cancel with an empty ID prefix", "POST", e.url("/timers/cancel"), `{"id_prefix": "", "labels": {}}`, true,
				422, api.SlugInvalidArgument, "/id_prefix", "id_prefix is empty"},
			{"bulk cancel below epoch 0", "POST", e.url("/timers/cancel"), `{"owner": "wf", "epoch_below": 0}`, true,
				422, api.SlugInvalidArgument, "/epoch_below", "epoch_below is 0"},
			{"schedule with an empty owner", "POST", e.url("/schedules"), `{"id": "s", "every": "1h", "owner": ""}`, true,
				422, api.SlugInvalidArgument, "/owner", "owner is empty"},
			{"debounce with an empty owner", "POST", e.url("/debounce/k"), `{"delay": "1s", "max_wait": "1m", "owner": ""}`, true,
				422, api.SlugInvalidArgument, "/owner", "owner is empty"},
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

// TestRequestKeysAreExact: on every route that takes a body, a key given
// twice (encoding/json would keep the last) and a key in another case
// than its field's (encoding/json would match "ID" to "id") are refused
// with 400 naming the key, at the top level and in nested objects and
// batch items, and nothing is written. A lone surrogate escape, which
// encoding/json would store as U+FFFD, is refused as timerctl import
// refuses it. Every operation of the document with a request body has a
// case here.
func TestRequestKeysAreExact(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		e := newEnv(t, b, api.Options{})
		ctx := context.Background()
		before := e.snapshot()
		g := e.url("/groups/g")
		cases := []struct {
			route       string // the document's operation
			url, body   string
			docInvalid  bool
			field, want string
		}{
			{"PUT /v1/namespaces/{ns}", e.srv.URL + "/v1/namespaces/" + e.ns + "-k", `{"shards": 2, "shards": 3}`, false, "/shards", `key "shards" is given twice in the body`},
			{"PUT /v1/namespaces/{ns}", e.srv.URL + "/v1/namespaces/" + e.ns + "-k", `{"Shards": 2}`, true, "/Shards", `write it "shards"`},
			{"POST /v1/namespaces/{ns}/timers", e.url("/timers"), `{"id": "a", "id": "b", "in": "1h"}`, false, "/id", `key "id" is given twice`},
			{"POST /v1/namespaces/{ns}/timers", e.url("/timers"), `{"ID": "a", "in": "1h"}`, true, "/ID", `unknown field "ID" in the body: keys are case-sensitive; write it "id"`},
			{"POST /v1/namespaces/{ns}/timers", e.url("/timers"), `{"\u0049D": "a", "in": "1h"}`, true, "/ID", `write it "id"`},
			{"POST /v1/namespaces/{ns}/timers", e.url("/timers"), "{\"id\": \"a\", \"\u212an\": \"1h\"}", true, "", ""}, // K (Kelvin) in is no field: unknown
			{"POST /v1/namespaces/{ns}/timers", e.url("/timers"), `{"id": "a", "in": "1h", "deliver": {"Endpoint": "e"}}`, true, "/deliver/Endpoint", `in /deliver: keys are case-sensitive`},
			{"POST /v1/namespaces/{ns}/timers", e.url("/timers"), `{"id": "sur\ud800", "in": "1h"}`, false, "", `the body has \ud800, half of a UTF-16 surrogate pair`},
			{"POST /v1/namespaces/{ns}/timers/batch", e.url("/timers/batch"), `{"timers": [{"id": "a", "in": "1h"}, {"id": "b", "in": "1h", "in": "2h"}]}`, false, "/timers/1/in", `key "in" is given twice in /timers/1`},
			{"POST /v1/namespaces/{ns}/timers/batch", e.url("/timers/batch"), `{"timers": [{"id": "a", "in": "1h"}, {"Id": "b", "in": "1h"}]}`, true, "/timers/1/Id", `write it "id"`},
			{"POST /v1/namespaces/{ns}/timers/batch", e.url("/timers/batch"), `{"timers": [{"id": "a", "in": "1h"}], "Timers": []}`, true, "/Timers", `write it "timers"`},
			{"POST /v1/namespaces/{ns}/timers/cancel", e.url("/timers/cancel"), `{"id_prefix": "a", "id_prefix": "b"}`, false, "/id_prefix", "given twice"},
			{"POST /v1/namespaces/{ns}/timers/cancel", e.url("/timers/cancel"), `{"ID_Prefix": "a"}`, true, "/ID_Prefix", `write it "id_prefix"`},
			{"POST /v1/namespaces/{ns}/timers/{id}/reschedule", e.url("/timers/a/reschedule"), `{"in": "1h", "In": "2h"}`, true, "/In", `write it "in"`},
			{"POST /v1/namespaces/{ns}/debounce/{key}", e.url("/debounce/k"), `{"delay": "1s", "max_wait": "1m", "delay": "2s"}`, false, "/delay", "given twice"},
			{"POST /v1/namespaces/{ns}/debounce/{key}", e.url("/debounce/k"), `{"delay": "1s", "Max_Wait": "1m"}`, true, "/Max_Wait", `write it "max_wait"`},
			{"POST /v1/namespaces/{ns}/schedules", e.url("/schedules"), `{"id": "s", "every": "1h", "every": "2h"}`, false, "/every", "given twice"},
			{"POST /v1/namespaces/{ns}/schedules", e.url("/schedules"), `{"id": "s", "every": "1h", "deliver": {"endpoint": "e", "endpoint": "f"}}`, false, "/deliver/endpoint", "given twice in /deliver"},
			{"PUT /v1/namespaces/{ns}/schedules/{id}", e.url("/schedules/s"), `{"Every": "1h"}`, true, "/Every", `write it "every"`},
			{"POST /v1/namespaces/{ns}/groups/{group}/lease", g + "/lease", `{"consumer": "c", "count": 1, "Lease": "1m"}`, true, "/Lease", `write it "lease"`},
			{"POST /v1/namespaces/{ns}/groups/{group}/ack", g + "/ack", `{"delivery_ids": ["0/1-1"], "delivery_ids": ["0/1-2"]}`, false, "/delivery_ids", "given twice"},
			{"POST /v1/namespaces/{ns}/groups/{group}/deliveries/{delivery}/release", g + "/deliveries/0~1-1/release", `{"delay": "1s", "Delay": "2s"}`, true, "/Delay", `write it "delay"`},
			{"POST /v1/namespaces/{ns}/groups/{group}/deliveries/{delivery}/extend", g + "/deliveries/0~1-1/extend", `{"lease_for": "1m", "lease_for": "2m"}`, false, "/lease_for", "given twice"},
			{"PUT /v1/namespaces/{ns}/endpoints/{name}", e.url("/endpoints/e"), `{"url": "https://example.com/h", "secrets": ["whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"], "headers": {"X-A": "1", "X-A": "2"}}`, false, "/headers/X-A", "given twice in /headers"},
			{"PUT /v1/namespaces/{ns}/endpoints/{name}", e.url("/endpoints/e"), `{"url": "https://example.com/h", "secrets": ["whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"], "retry": {"Max_Attempts": 3}}`, true, "/retry/Max_Attempts", `write it "max_attempts"`},
			{"PUT /v1/namespaces/{ns}/delivery-policy", e.url("/delivery-policy"), `{"allow_timer_urls": false, "allow_timer_urls": true}`, false, "/allow_timer_urls", "given twice"},
			{"PUT /v1/namespaces/{ns}/flow-policies", e.url("/flow-policies"), `{"rate": 1, "Rate": 2}`, true, "/Rate", `write it "rate"`},
			{"PUT /v1/namespaces/{ns}/quotas", e.url("/quotas"), `{"pending": 5, "pending": 6}`, false, "/pending", "given twice"},
			{"PUT /v1/namespaces/{ns}/quotas", e.url("/quotas"), `{"Pending": 5}`, true, "/Pending", `write it "pending"`},
			{"POST /v1/namespaces/{ns}/owners/{owner}/epoch", e.url("/owners/wf/epoch"), `{"cancel_older": true, "cancel_older": false}`, false, "/cancel_older", "given twice"},
			{"POST /v1/namespaces/{ns}/owners/{owner}/epoch", e.url("/owners/wf/epoch"), `{"Cancel_Older": true}`, true, "/Cancel_Older", `write it "cancel_older"`},
			{"POST /v1/namespaces/{ns}/timers", e.url("/timers"), `{"id": "a", "in": "1h", "labels": {"k": "v", "k": "w"}}`, false, "/labels/k", "given twice in /labels"},
			{"POST /v1/namespaces/{ns}/timers", e.url("/timers"), `{"id": "a", "in": "1h", "Owner": "wf"}`, true, "/Owner", `write it "owner"`},
			{"POST /v1/namespaces/{ns}/timers/cancel", e.url("/timers/cancel"), `{"owner": "a", "labels": {"k": "v", "k": "v"}}`, false, "/labels/k", "given twice in /labels"},
		}
		covered := map[string]bool{}
		for _, c := range cases {
			covered[c.route] = true
			t.Run(c.route+" "+c.body, func(t *testing.T) {
				rctx := ctx
				if c.docInvalid {
					rctx = expectInvalid(ctx)
				}
				method, _, _ := strings.Cut(c.route, " ")
				r := e.do(rctx, method, c.url, c.body)
				p := r.problem(t)
				if r.Status != http.StatusBadRequest || p.Type != api.ProblemTypePrefix+api.SlugInvalidRequest ||
					(c.want != "" && (p.Field != c.field || !strings.Contains(p.Detail, c.want))) {
					t.Errorf("%d %s, want 400 invalid-request field %q detail containing %q", r.Status, r.Body, c.field, c.want)
				}
			})
		}
		doc := loadContract(t).doc
		for path, item := range doc.Paths.Map() {
			for method, op := range item.Operations() {
				if op.RequestBody != nil && !covered[method+" "+path] {
					t.Errorf("%s %s takes a body, and the test sends it no repeated or case-changed key", method, path)
				}
			}
		}
		if after := e.snapshot(); after != before {
			t.Errorf("the refused requests changed the namespace:\nbefore %s\nafter  %s", before, after)
		}
	})
}
