package api_test

import (
	"context"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/timerq/timerq/api"
	"github.com/timerq/timerq/internal/keyspace"
	"github.com/timerq/timerq/internal/redistest"
)

// clauses splits a message into its clauses, at the punctuation that
// joins a cause to its hint and one hint to the next.
var clauses = regexp.MustCompile(`[;:,]\s+|\s*\(|\)`)

// hintMarkers are words that belong to one hint each: a message that
// holds one twice gives that hint twice.
var hintMarkers = []string{"docs/security.md", "raise maxmemory", "another program writes", "remove those keys", "check that Redis is reachable"}

// repeatedHint returns a hint that msg gives twice (a clause of four
// words or more, or a hint marker), or "".
func repeatedHint(msg string) string {
	for _, m := range hintMarkers {
		if strings.Count(msg, m) > 1 {
			return m
		}
	}
	seen := map[string]bool{}
	for _, c := range clauses.Split(msg, -1) {
		c = strings.TrimSpace(strings.TrimPrefix(strings.TrimPrefix(c, "so "), "or "))
		if len(strings.Fields(c)) < 4 {
			continue
		}
		if seen[c] {
			return c
		}
		seen[c] = true
	}
	return ""
}

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
		if h := repeatedHint(p.Detail); h != "" {
			t.Errorf("the detail gives %q twice: %s", h, p.Detail)
		}
	})
}
