package aclright_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/timerq/timerq/internal/keyspace"
	"github.com/timerq/timerq/internal/redistest"
	lua "github.com/timerq/timerq/scripts/lua"
)

// TestEveryScriptRefusesARetiredKey: a later layout retires a key by
// leaving keyspace.LayoutMarker in its place (docs/redis-layout.md,
// "Layout versions"). Every script of the table, in every scenario, with
// each of its keys in turn replaced by a marker, either refuses with
// TIMERQ_LAYOUT naming that key and writes nothing, or runs without
// touching it. It never fails with a plain WRONGTYPE (whose hint says to
// delete the key) or another error, and never writes over the marker: a
// build that predates a layout cannot put a timer where the new layout
// does not look. The due set, which every timer-writing script reads, is
// the key a later layout can retire to stop all of them: those scripts
// must refuse when it is marked.
//
// The namespace's meta hash is not such a key (a later layout records
// itself there), and create.lua, which refuses any existing key of the
// namespace (TIMERQ_INUSE), is exempt. lease.lua and release.lua take the
// shard's keys for its stream and dead letters and never read the due set.
// Each script with a layout-2 build runs again as that build, on layout 2's
// keys, where sched stands for the due set.
func TestEveryScriptRefusesARetiredKey(t *testing.T) {
	withoutDue := map[string]bool{"lease": true, "release": true}
	srv := redistest.Start(t, redistest.Config{})
	admin := srv.Client(t)
	marker := keyspace.LayoutMarker(keyspace.Layout + 1)
	runs := scenarios()
	n := 0
	for _, entry := range lua.All {
		for layout, s := range entry.Layouts() {
			layout++ // Layouts lists layout 1's build, then layout 2's
			name := s.Name
			if layout == 2 {
				name += "/layout2"
			}
			refusesRetiredKeys(t, admin, runs[s.Name], s, layout, name, marker, withoutDue[s.Name], &n)
		}
	}
}

// refusesRetiredKeys is TestEveryScriptRefusesARetiredKey for s, the build
// of a script for shards of layout layout.
func refusesRetiredKeys(t *testing.T, admin *redis.Client, runs []scenario, s *lua.Script, layout int, name, marker string,
	withoutDue bool, n *int) {
	ctx := context.Background()
	{
		script := redis.NewScript(s.Source)
		t.Run(name, func(t *testing.T) {
			for _, run := range runs {
				for i, key := range s.Keys(keyspace.Shard("x", 0, 1).AtLayout(layout), "g") {
					*n++
					ns := fmt.Sprintf("layout%d", *n)
					sp := keyspace.Shard(ns, 0, 1).AtLayout(layout)
					keys := s.Keys(sp, "g")
					retired := keys[i]
					if retired == sp.Namespace().Meta() {
						continue
					}
					run.setup(t, admin, sp)
					do(t, admin, "DEL", retired)
					do(t, admin, "SET", retired, marker)
					before := snapshot(t, admin, ns)
					err := script.Run(ctx, admin, keys, run.args(sp)...).Err()
					after := snapshot(t, admin, ns)
					isDue := retired == sp.Due()
					what := fmt.Sprintf("%s with KEYS[%d] %s retired (%s)", run.name, i+1, key, retired)
					if v, _ := admin.Get(ctx, retired).Result(); v != marker {
						t.Errorf("%s: the marker was overwritten with %q", what, v)
					}
					if err == nil || err == redis.Nil {
						if isDue && !withoutDue {
							t.Errorf("%s: ran without the due set, and wrote:\nbefore:\n%s\nafter:\n%s", what, before, after)
						}
						continue
					}
					if s.Name == "create" && strings.Contains(err.Error(), "TIMERQ_INUSE "+retired) {
						continue
					}
					want := fmt.Sprintf("TIMERQ_LAYOUT %d %s", keyspace.Layout+1, retired)
					if !strings.Contains(err.Error(), want) {
						t.Errorf("%s: %v, want an error containing %q", what, err, want)
						continue
					}
					if after != before {
						t.Errorf("%s: the refused script wrote:\nbefore:\n%s\nafter:\n%s", what, before, after)
					}
				}
			}
		})
	}
}
