package ctl_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/timerq/timerq/internal/keyspace"
	"github.com/timerq/timerq/internal/redistest"
)

// timerctl manages schedules in a sharded namespace, one on each shard:
// schedule, list (paged across shards), get, pause, resume, delete, and
// export/import into a namespace of another shard count.
func TestRecurringCommandsOnShardedNamespace(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		const shards = 4
		c := newCLI(t, b)
		c.ok("namespace", "create", c.ns, "--shards", fmt.Sprint(shards))
		ids := make([]string, shards) // ids[k] lives in shard k
		for i, left := 0, shards; left > 0; i++ {
			if id := fmt.Sprint("job", i); ids[keyspace.ScheduleShard(id, shards)] == "" {
				ids[keyspace.ScheduleShard(id, shards)] = id
				left--
			}
		}
		for k, id := range ids {
			s := decode[scheduleJSON](t, c.ok("schedule", id, "--every", fmt.Sprint(k+1, "m"), "-p", id, "-o", "json").stdout)
			if s.ID != id || s.State != "active" || len(s.Pending) != 2 || s.Note != "created" {
				t.Fatalf("schedule %s = %+v", id, s)
			}
			for _, p := range s.Pending {
				if got := keyspace.ShardOf(p.ID, shards); got != k {
					t.Fatalf("occurrence %s is routed to shard %d, its schedule %s to %d", p.ID, got, id, k)
				}
				// The occurrence is a timer that get finds, in its shard.
				if r := c.ok("get", p.ID, "-o", "json"); !strings.Contains(r.stdout, `"scheduled"`) {
					t.Fatalf("get %s:\n%s", p.ID, r.stdout)
				}
			}
		}

		listed := map[string]int{}
		cursor := ""
		for range 4 * shards {
			args := []string{"schedules", "list", "--limit", "1", "-o", "json"}
			if cursor != "" {
				args = append(args, "--cursor", cursor)
			}
			page := decode[struct {
				Schedules  []scheduleJSON `json:"schedules"`
				NextCursor string         `json:"next_cursor"`
			}](t, c.ok(args...).stdout)
			for _, s := range page.Schedules {
				listed[s.ID]++
			}
			if cursor = page.NextCursor; cursor == "" {
				break
			}
		}
		if len(listed) != shards {
			t.Fatalf("listed %v, want each of %v once", listed, ids)
		}
		for id, n := range listed {
			if n != 1 {
				t.Fatalf("listed %s %d times", id, n)
			}
		}

		for _, id := range ids {
			if p := decode[scheduleJSON](t, c.ok("schedules", "pause", id, "-o", "json").stdout); p.State != "paused" || len(p.Pending) != 0 {
				t.Fatalf("pause %s = %+v", id, p)
			}
			if p := decode[scheduleJSON](t, c.ok("schedules", "resume", id, "-o", "json").stdout); p.State != "active" || len(p.Pending) != 2 {
				t.Fatalf("resume %s = %+v", id, p)
			}
		}

		// Export, and import into an unsharded namespace and one of 3
		// shards: every schedule comes back with the same occurrences.
		out := c.ok("schedules", "export").stdout
		for _, dstShards := range []int{1, 3} {
			dst := newCLI(t, b)
			if dstShards > 1 {
				dst.ok("namespace", "create", dst.ns, "--shards", fmt.Sprint(dstShards))
			}
			if r := dst.runCtx(context.Background(), out, "schedules", "import"); r.code != 0 || !strings.Contains(r.stdout, fmt.Sprint(shards, " created")) {
				t.Fatalf("import into %d shards: exit %d, %q, %q", dstShards, r.code, r.stdout, r.stderr)
			}
			for _, id := range ids {
				want := decode[scheduleJSON](t, c.ok("schedules", "get", id, "-o", "json").stdout)
				got := decode[scheduleJSON](t, dst.ok("schedules", "get", id, "-o", "json").stdout)
				want.Version, got.Version, want.Next, got.Next = 0, 0, nil, nil
				g, _ := json.Marshal(got)
				w, _ := json.Marshal(want)
				if string(g) != string(w) {
					t.Fatalf("schedule %s imported into %d shards:\n got %s\nwant %s", id, dstShards, g, w)
				}
			}
		}

		for _, id := range ids {
			c.ok("schedules", "delete", id)
			if r := c.run("schedules", "get", id); r.code == 0 {
				t.Fatalf("get %s after delete: exit 0\n%s", id, r.stdout)
			}
		}
		if list := c.ok("schedules", "list", "-o", "json").stdout; strings.Contains(list, `"id"`) {
			t.Fatalf("list after deleting every schedule:\n%s", list)
		}
	})
}
