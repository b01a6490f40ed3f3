package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/timerq/timerq/api"
	"github.com/timerq/timerq/internal/redistest"
)

func (r resp) schedule(t testing.TB) api.ScheduleJSON {
	t.Helper()
	var j api.ScheduleJSON
	if err := json.Unmarshal(r.Body, &j); err != nil {
		t.Fatalf("answer %d %s is not a schedule: %v", r.Status, r.Body, err)
	}
	return j
}

// TestScheduleLifecycle creates, reads, lists, updates, pauses, resumes and
// deletes a recurring schedule, checking each answer against Redis.
func TestScheduleLifecycle(t *testing.T) {
	redistest.ForEachAll(t, func(t *testing.T, b *redistest.Backend) {
		e := newEnv(t, b, api.Options{})
		ctx := context.Background()
		r := e.do(ctx, "POST", e.url("/schedules"), map[string]any{"id": "nightly/report", "cron": "0 3 * * *", "tz": "Europe/Berlin", "payload_text": "run", "ahead": 3})
		s := r.schedule(t)
		if r.Status != http.StatusCreated || s.State != "active" || s.TZ != "Europe/Berlin" || len(s.Pending) != 3 || string(s.Payload) != "run" || !*s.Created {
			t.Fatalf("create = %d %s", r.Status, r.Body)
		}
		r = e.do(ctx, "POST", e.url("/schedules"), map[string]any{"id": "nightly/report", "every": "1h"})
		if s2 := r.schedule(t); r.Status != http.StatusOK || s2.Cron != "0 3 * * *" || *s2.Created {
			t.Fatalf("re-create = %d %s, want the existing schedule unchanged", r.Status, r.Body)
		}
		if r := e.do(ctx, "POST", e.url("/schedules"), map[string]any{"id": "every", "every": "90s", "catch_up": "skip", "overlap": "skip"}); r.Status != http.StatusCreated {
			t.Fatalf("create every = %d %s", r.Status, r.Body)
		}
		// Its occurrences are ordinary timers.
		occ := s.Pending[0].ID
		if r := e.do(ctx, "GET", e.url("/timers/"+pathID(occ)), nil); r.Status != http.StatusOK || r.timer(t).State != "scheduled" {
			t.Fatalf("occurrence %s = %d %s", occ, r.Status, r.Body)
		}

		r = e.do(ctx, "GET", e.url("/schedules?limit=1"), nil)
		var ids []string
		for {
			var page struct {
				Schedules  []api.ScheduleJSON
				NextCursor string `json:"next_cursor"`
			}
			if r.Status != http.StatusOK || json.Unmarshal(r.Body, &page) != nil {
				t.Fatalf("list = %d %s", r.Status, r.Body)
			}
			for _, s := range page.Schedules {
				ids = append(ids, s.ID)
			}
			if page.NextCursor == "" {
				break
			}
			r = e.do(ctx, "GET", e.url("/schedules?limit=1&cursor="+page.NextCursor), nil)
		}
		if len(ids) != 2 {
			t.Fatalf("listed %v, want both schedules", ids)
		}

		r = e.do(ctx, "PUT", e.url("/schedules/nightly%2Freport"), map[string]any{"cron": "30 4 * * *", "payload_text": "run v2"})
		if s := r.schedule(t); r.Status != http.StatusOK || s.Cron != "30 4 * * *" || s.TZ != "" || string(s.Payload) != "run v2" || s.Version != 2 {
			t.Fatalf("update = %d %s", r.Status, r.Body)
		}
		r = e.do(ctx, "POST", e.url("/schedules/nightly%2Freport/pause"), nil)
		if s := r.schedule(t); r.Status != http.StatusOK || s.State != "paused" || len(s.Pending) != 0 {
			t.Fatalf("pause = %d %s", r.Status, r.Body)
		}
		r = e.do(ctx, "POST", e.url("/schedules/nightly%2Freport/resume"), nil)
		if s := r.schedule(t); r.Status != http.StatusOK || s.State != "active" || len(s.Pending) == 0 {
			t.Fatalf("resume = %d %s", r.Status, r.Body)
		}
		r = e.do(ctx, "DELETE", e.url("/schedules/nightly%2Freport"), nil)
		if r.Status != http.StatusNoContent {
			t.Fatalf("delete = %d %s", r.Status, r.Body)
		}
		if _, err := e.q.Recurring().Get(ctx, "nightly/report"); err == nil {
			t.Fatal("the schedule is still in Redis after delete")
		}
		for _, c := range []struct{ method, path string }{{"GET", ""}, {"DELETE", ""}, {"POST", "/pause"}, {"PUT", ""}} {
			var body any
			if c.method == "PUT" {
				body = map[string]any{"every": "1h"}
			}
			r = e.do(ctx, c.method, e.url("/schedules/nightly%2Freport"+c.path), body)
			if p := r.problem(t); r.Status != http.StatusNotFound || p.Type != api.ProblemTypePrefix+api.SlugScheduleNotFound || !strings.Contains(p.Detail, "not found") ||
				!strings.Contains(p.Detail, "GET /v1/namespaces/") || strings.Contains(p.Detail, "Recurring()") {
				t.Fatalf("%s%s of a deleted schedule = %d %s", c.method, c.path, r.Status, r.Body)
			}
		}
	})
}

// TestNamespaceCreateAndStats: PUT fixes a namespace's shard count (201,
// then 200 for the same count, 409 for another), and the timers created
// through the API land on its shards, where GET counts them, with their due
// horizon.
func TestNamespaceCreateAndStats(t *testing.T) {
	redistest.ForEachAll(t, func(t *testing.T, b *redistest.Backend) {
		e := newEnv(t, b, api.Options{})
		ctx := context.Background()
		ns := e.ns + "-new"
		nsURL := e.srv.URL + "/v1/namespaces/" + ns
		// A read first, so the handler opens the namespace while it has
		// the default one shard: the PUT must not leave that open.
		if r := e.do(ctx, "GET", nsURL+"/timers/x", nil); r.Status != http.StatusNotFound {
			t.Fatalf("get before create = %d %s", r.Status, r.Body)
		}
		r := e.do(ctx, "PUT", nsURL, map[string]any{"shards": 4})
		var n api.NamespaceJSON
		if json.Unmarshal(r.Body, &n) != nil || r.Status != http.StatusCreated || n.Shards != 4 || !n.Created {
			t.Fatalf("create = %d %s", r.Status, r.Body)
		}
		if r := e.do(ctx, "PUT", nsURL, map[string]any{"shards": 4}); r.Status != http.StatusOK {
			t.Fatalf("create again = %d %s", r.Status, r.Body)
		}
		r = e.do(ctx, "PUT", nsURL, map[string]any{"shards": 8})
		if p := r.problem(t); r.Status != http.StatusConflict || p.Type != api.ProblemTypePrefix+api.SlugShardMismatch || !strings.Contains(p.Detail, "4 shards") {
			t.Fatalf("create with another count = %d %s", r.Status, r.Body)
		}
		var batch []map[string]any
		for _, id := range strings.Split("a b c d e f g h i j k l", " ") {
			batch = append(batch, map[string]any{"id": id, "in": "1h"})
		}
		if r := e.do(ctx, "POST", nsURL+"/timers/batch", map[string]any{"timers": batch}); r.Status != http.StatusOK {
			t.Fatal(r.Status, string(r.Body))
		}
		r = e.do(ctx, "GET", nsURL, nil)
		if json.Unmarshal(r.Body, &n) != nil || r.Status != http.StatusOK || n.Shards != 4 || !n.Created || n.Stats == nil ||
			n.Stats.Scheduled != 12 || len(n.Stats.Shards) != 4 {
			t.Fatalf("stats = %d %s", r.Status, r.Body)
		}
		used := 0
		for _, s := range n.Stats.Shards {
			if s.Scheduled > 0 {
				used++
			}
		}
		if used < 2 {
			t.Fatalf("the timers are on %d shard(s), want them spread over the 4: %s", used, r.Body)
		}
		// The due horizon, summed over the shards: the 12 are due within
		// the hour, none sooner.
		want := []api.DueWithinJSON{{Within: "overdue"}, {Within: "1m"}, {Within: "1h", Count: 12}, {Within: "1d", Count: 12}, {Within: "1w", Count: 12}}
		if !slices.Equal(n.Stats.DueWithin, want) {
			t.Errorf("due_within = %+v, want %+v", n.Stats.DueWithin, want)
		}
		// An empty body creates one shard.
		if r := e.doRaw(ctx, "PUT", nsURL+"-one", "application/json", ""); r.Status != http.StatusCreated {
			t.Fatalf("create with an empty body = %d %s", r.Status, r.Body)
		}
	})
}
