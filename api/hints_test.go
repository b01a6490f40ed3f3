package api_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/timerq/timerq/api"
	"github.com/timerq/timerq/internal/errtext"
	"github.com/timerq/timerq/internal/keyspace"
	"github.com/timerq/timerq/internal/redistest"
)

// TestWrongTypeHintOnce: a namespace key of the wrong type answers 500
// wrong-type with the fix once (it was printed twice, by the queue and
// again by the API).
func TestWrongTypeHintOnce(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		e := newEnv(t, b, api.Options{})
		ctx := context.Background()
		due := keyspace.Shard(e.ns, 0, 1).Due()
		if err := b.Client.Set(ctx, due, "x", 0).Err(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Client.Del(context.Background(), due) })
		r := e.do(ctx, "POST", e.url("/timers"), map[string]any{"id": "a", "in": "1h"})
		p := r.problem(t)
		if r.Status != http.StatusInternalServerError || p.Type != api.ProblemTypePrefix+api.SlugWrongType ||
			!strings.Contains(p.Detail, "another program writes under") {
			t.Fatalf("create over a wrong-type key = %d %s", r.Status, r.Body)
		}
		if h := errtext.RepeatedHint(p.Detail); h != "" {
			t.Errorf("the detail gives %q twice: %s", h, p.Detail)
		}
	})
}
