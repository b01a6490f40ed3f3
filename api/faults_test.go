package api_test

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/timerq/timerq/api"
	"github.com/timerq/timerq/internal/errtext"
	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/queue"
)

// realBackend is a private real redis-server, for faults that must not
// touch the shared ones.
func realBackend(t *testing.T) (*redistest.Server, *redistest.Backend) {
	srv := redistest.Start(t, redistest.Config{})
	return srv, &redistest.Backend{Name: "real", Client: srv.Client(t), Real: srv}
}

// TestRedisUnreachable: with Redis gone, every call answers 503 with
// Retry-After and a detail that says Redis cannot be reached.
func TestRedisUnreachable(t *testing.T) {
	srv, b := realBackend(t)
	dead := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1, DialTimeout: time.Second})
	defer dead.Close()
	e := newEnv(t, b, api.Options{Client: dead, RetryAfter: 3 * time.Second})
	srv.Stop()
	ctx := context.Background()
	for _, c := range []struct {
		method, path string
		body         any
	}{
		{"POST", "/timers", map[string]any{"id": "a", "in": "1h"}},
		{"GET", "/timers/a", nil},
		{"GET", "/timers", nil},
		{"GET", "", nil},
	} {
		r := e.do(ctx, c.method, e.url(c.path), c.body)
		p := r.problem(t)
		if r.Status != http.StatusServiceUnavailable || p.Type != api.ProblemTypePrefix+api.SlugRedisUnavailable ||
			r.Header.Get("Retry-After") != "3" || !strings.Contains(p.Detail, "cannot reach Redis") {
			t.Errorf("%s %s with Redis down = %d %v %s", c.method, c.path, r.Status, r.Header, r.Body)
		}
		if h := errtext.RepeatedHint(p.Detail); h != "" {
			t.Errorf("%s %s with Redis down: the detail gives %q twice: %s", c.method, c.path, h, p.Detail)
		}
	}
}

// TestRedisOutOfMemory: over maxmemory with noeviction, creates answer 503
// with Retry-After and write nothing, while reads still answer.
func TestRedisOutOfMemory(t *testing.T) {
	srv, b := realBackend(t)
	e := newEnv(t, b, api.Options{})
	ctx := context.Background()
	payload := []byte(strings.Repeat("p", 8<<10))
	var batch []queue.NewTimer
	for i := range 300 {
		batch = append(batch, queue.NewTimer{ID: fmt.Sprint("m-", i), Due: time.Now().Add(time.Hour), Payload: payload})
	}
	if _, err := e.q.ScheduleBatch(ctx, batch); err != nil {
		t.Fatal(err)
	}
	rdb := srv.Client(t)
	info, err := rdb.InfoMap(ctx, "memory").Result()
	if err != nil {
		t.Fatal(err)
	}
	used, _ := strconv.ParseInt(info["Memory"]["used_memory"], 10, 64)
	if err := rdb.ConfigSet(ctx, "maxmemory-policy", "noeviction").Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.ConfigSet(ctx, "maxmemory", strconv.FormatInt(used-512<<10, 10)).Err(); err != nil {
		t.Fatal(err)
	}
	before := e.snapshot()
	for _, c := range []struct {
		path string
		body any
	}{
		{"/timers", map[string]any{"id": "new", "in": "1h"}},
		{"/timers/batch", map[string]any{"timers": []any{map[string]any{"id": "n1", "in": "1h"}, map[string]any{"id": "n2", "in": "1h"}}}},
		{"/timers/m-1/reschedule", map[string]any{"in": "2h"}},
		{"/schedules", map[string]any{"id": "s", "every": "1h"}},
	} {
		r := e.do(ctx, "POST", e.url(c.path), c.body)
		p := r.problem(t)
		if r.Status != http.StatusServiceUnavailable || p.Type != api.ProblemTypePrefix+api.SlugOutOfMemory ||
			r.Header.Get("Retry-After") != "2" || !strings.Contains(p.Detail, "nothing was written") {
			t.Errorf("POST %s over maxmemory = %d %v %s", c.path, r.Status, r.Header, r.Body)
		}
		if h := errtext.RepeatedHint(p.Detail); h != "" {
			t.Errorf("POST %s over maxmemory: the detail gives %q twice: %s", c.path, h, p.Detail)
		}
	}
	if after := e.snapshot(); after != before {
		t.Errorf("a refused write changed the namespace")
	}
	if r := e.do(ctx, "GET", e.url("/timers/m-1"), nil); r.Status != http.StatusOK {
		t.Errorf("a read over maxmemory = %d %s", r.Status, r.Body)
	}
}

// TestRedisPermissionDenied: a Redis user lacking a right gets 502 that
// names the right and the namespace, and nothing is written.
func TestRedisPermissionDenied(t *testing.T) {
	srv, b := realBackend(t)
	ctx := context.Background()
	admin := srv.Client(t)
	if err := admin.Do(ctx, "ACL", "SETUSER", "nohset", "reset", "on", ">pw", "~*", "&*", "+@all", "-hset").Err(); err != nil {
		t.Fatal(err)
	}
	uc := redis.NewClient(&redis.Options{Addr: srv.Addr(), Username: "nohset", Password: "pw"})
	defer uc.Close()
	e := newEnv(t, b, api.Options{Client: uc})
	if _, err := e.q.Schedule(ctx, "kept", time.Now().Add(time.Hour), nil); err != nil {
		t.Fatal(err)
	}
	before := e.snapshot()
	r := e.do(ctx, "POST", e.url("/timers"), map[string]any{"id": "a", "in": "1h"})
	p := r.problem(t)
	if r.Status != http.StatusBadGateway || p.Type != api.ProblemTypePrefix+api.SlugPermissionDenied ||
		p.Right != "+hset" || p.Namespace != e.ns || !strings.Contains(p.Detail, "docs/security.md") {
		t.Fatalf("create without HSET = %d %s", r.Status, r.Body)
	}
	if h := errtext.RepeatedHint(p.Detail); h != "" {
		t.Errorf("create without HSET: the detail gives %q twice: %s", h, p.Detail)
	}
	if r.Header.Get("Retry-After") != "" {
		t.Errorf("a missing right is not cured by retrying, yet Retry-After is %q", r.Header.Get("Retry-After"))
	}
	if after := e.snapshot(); after != before {
		t.Errorf("the refused create changed the namespace")
	}
}
