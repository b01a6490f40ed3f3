package api_test

import (
	"context"
	"encoding/base64"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/timerq/timerq/api"
	"github.com/timerq/timerq/internal/redistest"
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
