package aclright_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/timerq/timerq/internal/aclright"
	"github.com/timerq/timerq/internal/keyspace"
	"github.com/timerq/timerq/internal/redistest"
	lua "github.com/timerq/timerq/scripts/lua"
)

// scenario writes a state (as an admin) and gives the script's arguments
// for it.
type scenario struct {
	name  string
	setup func(t *testing.T, c *redis.Client, sp keyspace.Space)
	args  func(sp keyspace.Space) []any
}

const tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"

func ms(d time.Duration) string { return fmt.Sprint(time.Now().Add(d).UnixMilli()) }

func do(t *testing.T, c *redis.Client, args ...any) {
	t.Helper()
	if err := c.Do(context.Background(), args...).Err(); err != nil {
		t.Fatalf("%v: %v", args, err)
	}
}

// scheduled writes a scheduled timer as schedule.lua does.
func scheduled(t *testing.T, c *redis.Client, sp keyspace.Space, id string, due string) {
	t.Helper()
	do(t, c, "HSET", sp.Timers(), id, "s::1000::payload")
	do(t, c, "ZADD", sp.Due(), due, id)
}

// settled writes a timer settled (state "f" or "c") at settled ms, due at
// due ms, as a claim or a cancel writes it in the shard's layout, and
// with a purge time purge ms in layout 1.
func settled(t *testing.T, c *redis.Client, sp keyspace.Space, id, state string, due, settled, purge int64) {
	t.Helper()
	do(t, c, "HSET", sp.Timers(), id, fmt.Sprintf("%s:%d:1000:%d:x", state, due, settled))
	if sp.Layout() == 2 {
		band := int64(1) << 50
		if state == "c" {
			band <<= 1
		}
		do(t, c, "ZADD", sp.Due(), band+settled, id)
		return
	}
	set := sp.Fired()
	if state == "c" {
		set = sp.Cancelled()
	}
	do(t, c, "ZADD", set, due, id)
	do(t, c, "ZADD", sp.Expire(), purge, id)
}

// scenarios gives, for each script of the table by name, states and
// arguments that together run every command the script may run.
func scenarios() map[string][]scenario {
	nothing := func(*testing.T, *redis.Client, keyspace.Space) {}
	return map[string][]scenario{
		"schedule": {{
			setup: func(t *testing.T, c *redis.Client, sp keyspace.Space) {
				scheduled(t, c, sp, "old", ms(time.Hour))
				do(t, c, "HSET", sp.TimerMeta(), "old", "0\x1f\x1fwf")
				do(t, c, "HSET", sp.EndpointNames(), "billing", "{}")
			},
			args: func(sp keyspace.Space) []any {
				return []any{sp.Wake(), tp, 1000, "old", ms(time.Hour), "p", "", "",
					"new", "+1000.000", "p", "billing", "\x1f+5000\x1fwf\x1fk=v"}
			},
		}, {
			// Neither traced nor delivering: the records' HSET is the
			// first write, which no probe precedes.
			name:  "plain",
			setup: nothing,
			args:  func(sp keyspace.Space) []any { return []any{sp.Wake(), "", 0, "new", ms(time.Hour), "p", "", ""} },
		}},
		"claim": {{
			setup: func(t *testing.T, c *redis.Client, sp keyspace.Space) {
				scheduled(t, c, sp, "due", ms(-time.Second))
				do(t, c, "HSET", sp.Traces(), "due", tp)
				do(t, c, "HSET", sp.Deliveries(), "due", "billing")
				do(t, c, "HSET", sp.TimerMeta(), "due", "3\x1f\x1fwf")
				do(t, c, "HSET", sp.Timers(), "bad", "not a record")
				do(t, c, "ZADD", sp.Due(), ms(-time.Second), "bad")
				// A quarantined timer's meta, owner index entry, trace and
				// endpoint go with it.
				do(t, c, "HSET", sp.TimerMeta(), "bad", "0\x1f\x1fwf")
				do(t, c, "ZADD", sp.Owners(), "0", "wf\x00bad")
				do(t, c, "HSET", sp.Traces(), "bad", tp)
				do(t, c, "HSET", sp.Deliveries(), "bad", "billing")
			},
			args: func(sp keyspace.Space) []any { return []any{10, 60000, 1000, sp.TimerChannelPrefix()} },
		}},
		"hold": {{
			name: "hold",
			setup: func(t *testing.T, c *redis.Client, sp keyspace.Space) {
				scheduled(t, c, sp, "due", ms(-time.Second))
				do(t, c, "HSET", sp.Timers(), "bad", "not a record", "done", "f:1000:1000:2000:x")
				do(t, c, "ZADD", sp.Due(), ms(-time.Second), "bad", ms(-time.Second), "done", ms(-time.Second), "gone")
				do(t, c, "HSET", sp.Hold(), "top", "5-1")
				do(t, c, "HSET", sp.TimerMeta(), "bad", "0\x1f\x1fwf")
				do(t, c, "ZADD", sp.Owners(), "0", "wf\x00bad")
				do(t, c, "HSET", sp.Traces(), "bad", tp)
				do(t, c, "HSET", sp.Deliveries(), "bad", "billing")
			},
			args: func(keyspace.Space) []any { return []any{10, 3000, "tok", ""} },
		}, {
			name: "nothing held",
			setup: func(t *testing.T, c *redis.Client, sp keyspace.Space) {
				do(t, c, "HSET", sp.Timers(), "done", "f:1000:1000:2000:x")
				do(t, c, "ZADD", sp.Due(), ms(-time.Second), "done")
			},
			args: func(keyspace.Space) []any { return []any{10, 3000, "tok", ""} },
		}, {
			name: "takeover",
			setup: func(t *testing.T, c *redis.Client, sp keyspace.Space) {
				do(t, c, "HSET", sp.Hold(), "token", "old", "lease", "1000", "fired", "1000", "ms", "1000", "seq", "0", "n", "0")
			},
			args: func(keyspace.Space) []any { return []any{10, 3000, "tok", ""} },
		}},
		"commit": {{
			setup: func(t *testing.T, c *redis.Client, sp keyspace.Space) {
				due := ms(-time.Second)
				scheduled(t, c, sp, "c1", due)
				scheduled(t, c, sp, "c2", due)
				do(t, c, "HSET", sp.Traces(), "c1", tp)
				do(t, c, "HSET", sp.Hold(), "token", "tok", "lease", ms(time.Minute), "fired", ms(0), "ms", ms(0),
					"seq", "0", "n", "2", "i:0", due+":c1", "i:1", due+":c2")
			},
			args: func(sp keyspace.Space) []any { return []any{"tok", 60000, 1000, sp.TimerChannelPrefix()} },
		}},
		"cancel": {{
			setup: func(t *testing.T, c *redis.Client, sp keyspace.Space) { scheduled(t, c, sp, "c", ms(time.Hour)) },
			args:  func(sp keyspace.Space) []any { return []any{"c", 60000, sp.TimerChannel("c")} },
		}},
		"cancel_batch": {{
			setup: func(t *testing.T, c *redis.Client, sp keyspace.Space) {
				scheduled(t, c, sp, "j1", ms(time.Hour))
				scheduled(t, c, sp, "x1", ms(time.Hour))
				do(t, c, "HSET", sp.Timers(), "j2", "f:1000:1000:2000:x")
			},
			args: func(sp keyspace.Space) []any {
				return []any{"j*", 100, 60000, sp.TimerChannelPrefix(), "", "", "", "j"}
			},
		}, {
			// By owner: the owner index, then the metas and records.
			name: "owner",
			setup: func(t *testing.T, c *redis.Client, sp keyspace.Space) {
				scheduled(t, c, sp, "j1", ms(time.Hour))
				do(t, c, "HSET", sp.TimerMeta(), "j1", "1\x1f\x1fwf\x1fk=v")
				do(t, c, "ZADD", sp.Owners(), "0", "wf\x00j1")
			},
			args: func(sp keyspace.Space) []any {
				return []any{"*", 100, 60000, sp.TimerChannelPrefix(), "wf", "\x1fk=v", "2", ""}
			},
		}, {
			// By labels alone: a scan of the meta hash.
			name: "labels",
			setup: func(t *testing.T, c *redis.Client, sp keyspace.Space) {
				scheduled(t, c, sp, "j1", ms(time.Hour))
				do(t, c, "HSET", sp.TimerMeta(), "j1", "0\x1f\x1f\x1fk=v")
			},
			args: func(sp keyspace.Space) []any {
				return []any{"*", 100, 60000, sp.TimerChannelPrefix(), "", "\x1fk=v", "", ""}
			},
		}, {
			// Nothing to cancel: the progress hash's HSET is the one write.
			name: "nothing scheduled",
			setup: func(t *testing.T, c *redis.Client, sp keyspace.Space) {
				do(t, c, "HSET", sp.Timers(), "j2", "f:1000:1000:2000:x")
			},
			args: func(sp keyspace.Space) []any { return []any{"j*", 100, 0, sp.TimerChannelPrefix(), "", "", "", "j"} },
		}},
		"reschedule": {{
			setup: func(t *testing.T, c *redis.Client, sp keyspace.Space) { scheduled(t, c, sp, "r", ms(time.Hour)) },
			args:  func(sp keyspace.Space) []any { return []any{"r", "+1000.000", sp.Wake()} },
		}},
		"purge": {{
			setup: func(t *testing.T, c *redis.Client, sp keyspace.Space) {
				settled(t, c, sp, "p", "c", 1000, 2000, 3000)
				do(t, c, "HSET", sp.Traces(), "p", tp)
				do(t, c, "HSET", sp.Deliveries(), "p", "billing")
				do(t, c, "HSET", sp.TimerMeta(), "p", "0\x1f\x1fwf")
				do(t, c, "ZADD", sp.Owners(), "0", "wf\x00p")
			},
			args: func(keyspace.Space) []any { return []any{10, 1} },
		}},
		"stats": {{setup: nothing, args: func(keyspace.Space) []any { return nil }}},
		"epoch": {{setup: nothing, args: func(keyspace.Space) []any { return []any{"wf", "+"} }}},
		"owner_wake": {{
			setup: func(t *testing.T, c *redis.Client, sp keyspace.Space) {
				scheduled(t, c, sp, "w", ms(time.Hour))
				do(t, c, "ZADD", sp.Owners(), "0", "wf\x00w")
			},
			args: func(keyspace.Space) []any { return []any{"wf"} },
		}},
		"horizon": {{
			setup: func(t *testing.T, c *redis.Client, sp keyspace.Space) { scheduled(t, c, sp, "a", "1000") },
			args:  func(keyspace.Space) []any { return []any{0, 3600000} },
		}},
		"list": {{
			setup: func(t *testing.T, c *redis.Client, sp keyspace.Space) {
				scheduled(t, c, sp, "a", "1000")
				scheduled(t, c, sp, "b", "2000")
			},
			args: func(keyspace.Space) []any { return []any{"", 0, ms(time.Hour), 10, 1000, "a"} },
		}},
		"get": {{
			setup: func(t *testing.T, c *redis.Client, sp keyspace.Space) {
				scheduled(t, c, sp, "g", "1000")
				do(t, c, "HSET", sp.TimerMeta(), "g", "0\x1f\x1fwf")
			},
			args: func(keyspace.Space) []any { return []any{"g"} },
		}},
		"check": {{setup: nothing, args: func(sp keyspace.Space) []any { return []any{sp.TimerChannel(""), sp.Wake()} }}},
		"restore": {{
			setup: func(t *testing.T, c *redis.Client, sp keyspace.Space) {
				scheduled(t, c, sp, "old", ms(time.Hour))
				do(t, c, "HSET", sp.Schedules(), "sch", "1:a:0::::{}")
			},
			args: func(sp keyspace.Space) []any {
				return []any{60000, sp.Wake(), "", 1000,
					"old", "s", ms(time.Hour), "1000", "", "p", "",
					"new", "s", ms(time.Minute), "1000", "", "p", "4\x1f\x1fwf\x1fk=v",
					"sch@5", "f", "5", "1000", "2000", "p", ""}
			},
		}},
		"debounce_restore": {{
			// An open window's timer: restored, earlier than the shard's
			// head (a wakeup), and its window reopened (Keys takes "g"),
			// with its meta, raising its owner's epoch.
			name: "open",
			setup: func(t *testing.T, c *redis.Client, sp keyspace.Space) {
				scheduled(t, c, sp, "later", ms(2*time.Hour))
			},
			args: func(sp keyspace.Space) []any {
				return []any{60000, sp.Wake(), "g", ms(time.Hour), "g@1000", "s", ms(time.Minute), "1000", "", "p", "4\x1f\x1fwf\x1fk=v"}
			},
		}, {
			// A closed window's fired timer, kept for the retention.
			name: "fired", setup: nothing,
			args: func(sp keyspace.Space) []any {
				return []any{60000, sp.Wake(), "g", "", "g@1000", "f", "1500", "1000", "2000", "p", ""}
			},
		}, {
			// The timer exists, scheduled: returned as it is, with its meta.
			name: "existing",
			setup: func(t *testing.T, c *redis.Client, sp keyspace.Space) {
				scheduled(t, c, sp, "g@1000", ms(time.Hour))
				do(t, c, "HSET", sp.TimerMeta(), "g@1000", "1\x1f\x1fwf")
			},
			args: func(sp keyspace.Space) []any {
				return []any{60000, sp.Wake(), "g", ms(time.Hour), "g@1000", "s", ms(time.Minute), "1000", "", "p", "4\x1f\x1fwf"}
			},
		}},
		"requeue": {{
			setup: func(t *testing.T, c *redis.Client, sp keyspace.Space) {
				do(t, c, "XADD", sp.DeadLetter(), "5-1", "id", "x", "payload", "p", "group", "g", "error", "e")
			},
			args: func(keyspace.Space) []any { return []any{"5-1"} },
		}},
		"heartbeat": {
			{name: "stay", setup: nothing, args: func(keyspace.Space) []any { return []any{"w1", 10000, "0"} }},
			{name: "leave", setup: func(t *testing.T, c *redis.Client, sp keyspace.Space) {
				do(t, c, "ZADD", keyspace.Namespace(nsOf(sp)).Workers(), ms(time.Hour), "w1")
			}, args: func(keyspace.Space) []any { return []any{"w1", 10000, "1"} }},
		},
		"create": {{
			// A sharded count for a namespace without data: every TYPE runs.
			setup: nothing,
			args:  func(keyspace.Space) []any { return []any{4} },
		}, {
			// One upgraded to layout 2 that holds no timer: the marker is
			// read (GET).
			name: "layout 2",
			setup: func(t *testing.T, c *redis.Client, sp keyspace.Space) {
				do(t, c, "SET", keyspace.Shard(nsOf(sp), 0, 1).LegacyDue(), keyspace.LayoutMarker(2))
			},
			args: func(keyspace.Space) []any { return []any{4} },
		}},
		"upgrade": {{
			// A layout-1 shard with a timer of each state: the cutover
			// and the whole drain.
			name: "cutover",
			setup: func(t *testing.T, c *redis.Client, sp keyspace.Space) {
				scheduled(t, c, sp, "s", ms(time.Hour))
				do(t, c, "HSET", sp.Timers(), "f", "f:1000:1000:2000:x", "c", "c:1000:1000:2000:x")
				do(t, c, "ZADD", sp.Fired(), 1000, "f")
				do(t, c, "ZADD", sp.Cancelled(), 1000, "c")
				do(t, c, "ZADD", sp.Expire(), 3000, "f", 3000, "c")
			},
			args: func(keyspace.Space) []any { return []any{100, keyspace.LayoutMarker(2)} },
		}, {
			// Cut over already: the marker is read.
			name: "drained",
			setup: func(t *testing.T, c *redis.Client, sp keyspace.Space) {
				do(t, c, "SET", sp.LegacyDue(), keyspace.LayoutMarker(2))
			},
			args: func(keyspace.Space) []any { return []any{100, keyspace.LayoutMarker(2)} },
		}},
		"workers": {{setup: nothing, args: func(keyspace.Space) []any { return nil }}},
		"endpoint_put": {{
			setup: func(t *testing.T, c *redis.Client, sp keyspace.Space) {
				do(t, c, "HSET", sp.Namespace().Endpoints(), "old", "{}")
			},
			args: func(keyspace.Space) []any { return []any{"new", "{}", 100} },
		}},
		"debounce": {{
			// No window: one is opened (Keys takes the key "g"), traced and
			// delivering.
			name: "create",
			setup: func(t *testing.T, c *redis.Client, sp keyspace.Space) {
				do(t, c, "HSET", sp.EndpointNames(), "billing", "{}")
			},
			args: func(sp keyspace.Space) []any {
				return []any{"g", "1000", "60000", "p", "0", sp.Wake(), tp, "billing", 1000, "\x1f+5000\x1fwf\x1fk=v"}
			},
		}, {
			// An open window: its timer is pushed, earlier than the
			// shard's head (a wakeup), with a new payload and endpoint.
			name: "push",
			setup: func(t *testing.T, c *redis.Client, sp keyspace.Space) {
				opened := time.Now().UnixMilli()
				do(t, c, "SET", sp.Debounce("g"), fmt.Sprintf("%d:%d", opened, opened+3600000))
				scheduled(t, c, sp, fmt.Sprintf("g@%d", opened), ms(time.Hour))
				do(t, c, "HSET", sp.EndpointNames(), "billing", "{}")
			},
			args: func(sp keyspace.Space) []any {
				return []any{"g", "1000", "60000", "new", "0", sp.Wake(), "", "billing"}
			},
		}, {
			// A push without an endpoint into a delivering window.
			name: "push undeliver",
			setup: func(t *testing.T, c *redis.Client, sp keyspace.Space) {
				opened := time.Now().UnixMilli()
				id := fmt.Sprintf("g@%d", opened)
				do(t, c, "SET", sp.Debounce("g"), fmt.Sprintf("%d:%d", opened, opened+3600000))
				scheduled(t, c, sp, id, ms(time.Hour))
				do(t, c, "HSET", sp.Deliveries(), id, "billing")
			},
			args: func(sp keyspace.Space) []any { return []any{"g", "1000", "60000", "new", "0", sp.Wake(), "", ""} },
		}},
		"overlap": {{
			setup: func(t *testing.T, c *redis.Client, sp keyspace.Space) {
				for _, sid := range []string{"skip1", "skip2"} {
					do(t, c, "HSET", sp.Schedules(), sid, `1:a:1::1:{"overlap":"skip"}`)
				}
				do(t, c, "HSET", sp.Schedules(), "allow", `1:a:1::1:{}`)
				do(t, c, "XGROUP", "CREATE", sp.Fires(), "g", "$", "MKSTREAM")
				for i, id := range []string{"skip1@1", "skip1@2", "skip2@1", "allow@1"} {
					do(t, c, "XADD", sp.Fires(), fmt.Sprintf("%d-1", i+1), "id", id)
				}
				do(t, c, "XREADGROUP", "GROUP", "g", "c", "COUNT", 1, "STREAMS", sp.Fires(), ">")
				do(t, c, "HSET", sp.Overlap("g"), "skip1", "1-1", "allow", "1-1")
			},
			args: func(keyspace.Space) []any { return []any{"g", "2-1", "skip1", "3-1", "skip2", "4-1", "allow"} },
		}},
		"lease": {{
			// No group yet, nothing to hand out: the group is created and
			// the stream's tail read.
			name: "new group", setup: nothing,
			args: func(keyspace.Space) []any { return []any{"g", "c", 30000, 5, 10, 0, "0"} },
		}, {
			// A delivery whose lease ran out, past its attempts: reclaimed
			// and dead-lettered.
			name: "expired",
			setup: func(t *testing.T, c *redis.Client, sp keyspace.Space) {
				do(t, c, "XADD", sp.Fires(), "1-1", "id", "x", "payload", "p")
				do(t, c, "XADD", sp.Fires(), "2-1", "id", "y", "payload", "p")
				do(t, c, "XGROUP", "CREATE", sp.Fires(), "g", "0")
				do(t, c, "XREADGROUP", "GROUP", "g", "c", "COUNT", 2, "STREAMS", sp.Fires(), ">")
			},
			args: func(keyspace.Space) []any { return []any{"g", "c2", 0, 1, 1, 0, "0"} },
		}, {
			// A delivery whose lease ran out, past its deadline: reclaimed,
			// dead-lettered and counted.
			name: "reclaimed past its deadline",
			setup: func(t *testing.T, c *redis.Client, sp keyspace.Space) {
				do(t, c, "XADD", sp.Fires(), "1-1", "id", "x", "payload", "p", "meta", "0\x1f1000\x1f")
				do(t, c, "XGROUP", "CREATE", sp.Fires(), "g", "0")
				do(t, c, "XREADGROUP", "GROUP", "g", "c", "COUNT", 1, "STREAMS", sp.Fires(), ">")
			},
			args: func(keyspace.Space) []any { return []any{"g", "c2", 0, 5, 1, 0, "0"} },
		}, {
			// A new entry past its deadline, and one within it: the first
			// dead-lettered and counted, the second handed out.
			name: "new past its deadline",
			setup: func(t *testing.T, c *redis.Client, sp keyspace.Space) {
				do(t, c, "XADD", sp.Fires(), "1-1", "id", "x", "payload", "p", "meta", "0\x1f1000\x1fwf")
				do(t, c, "XADD", sp.Fires(), "2-1", "id", "y", "payload", "p", "meta", "0\x1f"+ms(time.Hour)+"\x1f")
				do(t, c, "XGROUP", "CREATE", sp.Fires(), "g", "0")
			},
			args: func(keyspace.Space) []any { return []any{"g", "c", 30000, 5, 10, 0, "0"} },
		}},
		"release": {{
			name: "release",
			setup: func(t *testing.T, c *redis.Client, sp keyspace.Space) {
				do(t, c, "XADD", sp.Fires(), "1-1", "id", "x", "payload", "p")
				do(t, c, "XGROUP", "CREATE", sp.Fires(), "g", "0")
				do(t, c, "XREADGROUP", "GROUP", "g", "c", "COUNT", 1, "STREAMS", sp.Fires(), ">")
			},
			args: func(keyspace.Space) []any { return []any{"g", "1-1", 1, "release", 1000, 30000, 5, "", 0} },
		}, {
			name: "dead",
			setup: func(t *testing.T, c *redis.Client, sp keyspace.Space) {
				do(t, c, "XADD", sp.Fires(), "1-1", "id", "x", "payload", "p")
				do(t, c, "XGROUP", "CREATE", sp.Fires(), "g", "0")
				do(t, c, "XREADGROUP", "GROUP", "g", "c", "COUNT", 1, "STREAMS", sp.Fires(), ">")
			},
			args: func(keyspace.Space) []any { return []any{"g", "1-1", 1, "dead", 0, 30000, 5, "gave up", 0} },
		}, {
			// A release whose redelivery would come past the fire's
			// deadline (the delivery ID's): dead-lettered and counted.
			name: "release past its deadline",
			setup: func(t *testing.T, c *redis.Client, sp keyspace.Space) {
				do(t, c, "XADD", sp.Fires(), "1-1", "id", "x", "payload", "p", "meta", "0\x1f"+ms(time.Second)+"\x1f")
				do(t, c, "XGROUP", "CREATE", sp.Fires(), "g", "0")
				do(t, c, "XREADGROUP", "GROUP", "g", "c", "COUNT", 1, "STREAMS", sp.Fires(), ">")
			},
			args: func(keyspace.Space) []any {
				return []any{"g", "1-1", 1, "release", 10000, 30000, 5, "", 0, ms(time.Second)}
			},
		}, {
			// A caller's own verdict: dead for its deadline, counted.
			name: "deadline",
			setup: func(t *testing.T, c *redis.Client, sp keyspace.Space) {
				do(t, c, "XADD", sp.Fires(), "1-1", "id", "x", "payload", "p")
				do(t, c, "XGROUP", "CREATE", sp.Fires(), "g", "0")
				do(t, c, "XREADGROUP", "GROUP", "g", "c", "COUNT", 1, "STREAMS", sp.Fires(), ">")
			},
			args: func(keyspace.Space) []any {
				return []any{"g", "1-1", 1, "deadline", 0, 30000, 5, "deadline: not sent", 0}
			},
		}},
		"flow_take": {{
			// Two deliveries of a flow with room for both but a rate of one
			// per 100 ms: one granted (every write), one not.
			name: "grant",
			setup: func(t *testing.T, c *redis.Client, sp keyspace.Space) {
				do(t, c, "ZADD", sp.FlowState("g", keyspace.FlowID("", "k")), ms(-time.Minute), "0-9-1")
			},
			args: func(keyspace.Space) []any { return []any{30000, 10, 1000, 2, 2, "0-1-1", "0-2-1"} },
		}},
		"flow_park": {{
			name: "park",
			setup: func(t *testing.T, c *redis.Client, sp keyspace.Space) {
				do(t, c, "XADD", sp.Fires(), "1-1", "id", "x", "payload", "p", "flow", "k")
				do(t, c, "XGROUP", "CREATE", sp.Fires(), "g", "0")
				do(t, c, "XREADGROUP", "GROUP", "g", "c", "COUNT", 1, "STREAMS", sp.Fires(), ">")
			},
			args: func(keyspace.Space) []any { return []any{"g", "c", ":k", ms(time.Second), 1, 1, "1-1", 1} },
		}},
		"flow_pop": {{
			// Two fires of a ready flow parked, one taken: the flow stays
			// ready, served.
			name: "pop",
			setup: func(t *testing.T, c *redis.Client, sp keyspace.Space) {
				do(t, c, "XADD", sp.Fires(), "1-1", "id", "x", "payload", "p", "flow", "k")
				do(t, c, "XADD", sp.Fires(), "2-1", "id", "y", "payload", "p", "flow", "k")
				do(t, c, "XGROUP", "CREATE", sp.Fires(), "g", "$")
				do(t, c, "ZADD", sp.FlowReady("g"), ms(-time.Second), ":k")
				do(t, c, "ZADD", sp.FlowParked("g"), 0, ":k\x00000000000000001-0000000001\x001",
					0, ":k\x00000000000000002-0000000001\x001")
			},
			args: func(keyspace.Space) []any { return []any{"g", "c", 1} },
		}, {
			// The last parked fire of a flow taken: the flow leaves the ready set.
			name: "last",
			setup: func(t *testing.T, c *redis.Client, sp keyspace.Space) {
				do(t, c, "XADD", sp.Fires(), "1-1", "id", "x", "payload", "p", "flow", "k")
				do(t, c, "XGROUP", "CREATE", sp.Fires(), "g", "$")
				do(t, c, "ZADD", sp.FlowReady("g"), ms(-time.Second), ":k")
				do(t, c, "ZADD", sp.FlowParked("g"), 0, ":k\x00000000000000001-0000000001\x001")
			},
			args: func(keyspace.Space) []any { return []any{"g", "c", 5} },
		}},
		"recur_load": {{
			setup: func(t *testing.T, c *redis.Client, sp keyspace.Space) {
				do(t, c, "HSET", sp.Schedules(), "rs", "1:a:1:100:100:{}")
				scheduled(t, c, sp, "rs@100", ms(-time.Hour))
				do(t, c, "ZADD", sp.SchedDue(), ms(-time.Hour), "rs")
			},
			args: func(keyspace.Space) []any { return []any{"due", 0, 10} },
		}},
		"recur_arm": {{
			setup: func(t *testing.T, c *redis.Client, sp keyspace.Space) {
				do(t, c, "HSET", sp.Schedules(), "ra", "1:a:1:100:100:{}", "rb", "1:a:1:100:100:{}")
				scheduled(t, c, sp, "ra@100", ms(time.Hour))
				do(t, c, "ZADD", sp.SchedDue(), ms(time.Hour), "ra", ms(time.Hour), "rb")
			},
			args: func(sp keyspace.Space) []any {
				return []any{sp.Wake(), "ra", 1, 100, 200, "a", "p", "billing", "\x1f\x1fwf\x1fk=v", 1, 200, ms(time.Minute),
					"rb", 1, 100, 100, "e", "p", "", "", 0}
			},
		}},
		"recur_put": {{
			// A create reads the debounce window of its ID (Keys takes "g").
			name: "create", setup: nothing,
			args: func(sp keyspace.Space) []any {
				return []any{"create", "g", "", "{}", "a", "300", "p", sp.Wake(), sp.TimerChannelPrefix(), 60000, "", "", 1000, "\x1f\x1fwf", 300, ms(time.Minute)}
			},
		}, {
			name: "update",
			setup: func(t *testing.T, c *redis.Client, sp keyspace.Space) {
				do(t, c, "HSET", sp.Schedules(), "rp", "1:a:1:100:100:{}")
				scheduled(t, c, sp, "rp@100", ms(time.Hour))
				do(t, c, "ZADD", sp.SchedDue(), ms(time.Hour), "rp")
				do(t, c, "HSET", sp.EndpointNames(), "billing", "{}")
			},
			args: func(sp keyspace.Space) []any {
				return []any{"update", "rp", "", "{}", "a", "300", "p", sp.Wake(), sp.TimerChannelPrefix(), 60000, "skip", "billing", 0, "", 300, ms(time.Minute)}
			},
		}, {
			name: "update without endpoint",
			setup: func(t *testing.T, c *redis.Client, sp keyspace.Space) {
				do(t, c, "HSET", sp.Schedules(), "rp", "1:a:1:100:100:{}")
				scheduled(t, c, sp, "rp@100", ms(time.Hour))
				do(t, c, "HSET", sp.Deliveries(), "rp@100", "billing")
				do(t, c, "ZADD", sp.SchedDue(), ms(time.Hour), "rp")
			},
			args: func(sp keyspace.Space) []any {
				return []any{"update", "rp", "", "{}", "a", "300", "p", sp.Wake(), sp.TimerChannelPrefix(), 60000, "", "", 0, "", 100, ms(time.Minute)}
			},
		}, {
			// Rewrites an occurrence of an owner with labels under a schedule
			// without: its meta field and its owner's index entry go.
			name: "update dropping meta",
			setup: func(t *testing.T, c *redis.Client, sp keyspace.Space) {
				do(t, c, "HSET", sp.Schedules(), "rp", "1:a:1:100:100:{}")
				scheduled(t, c, sp, "rp@100", ms(time.Hour))
				do(t, c, "HSET", sp.TimerMeta(), "rp@100", "0\x1f\x1fwf\x1fk=v")
				do(t, c, "ZADD", sp.Owners(), 0, "wf\x00rp@100")
				do(t, c, "ZADD", sp.SchedDue(), ms(time.Hour), "rp")
			},
			args: func(sp keyspace.Space) []any {
				return []any{"update", "rp", "", "{}", "a", "300", "p", sp.Wake(), sp.TimerChannelPrefix(), 60000, "", "", 0, "", 100, ms(time.Minute)}
			},
		}, {
			name: "delete",
			setup: func(t *testing.T, c *redis.Client, sp keyspace.Space) {
				do(t, c, "HSET", sp.Schedules(), "rp", "1:a:0:::{}")
				do(t, c, "ZADD", sp.SchedDue(), ms(time.Hour), "rp")
			},
			args: func(sp keyspace.Space) []any {
				return []any{"delete", "rp", "", "", "a", "-", "", sp.Wake(), sp.TimerChannelPrefix(), 60000, "", "", 0, ""}
			},
		}},
	}
}

func nsOf(sp keyspace.Space) string {
	tag := sp.HashTag()
	return strings.SplitN(tag[1:len(tag)-1], ":", 2)[0]
}

// snapshot dumps every key of the namespace, for telling whether a refused
// script wrote anything.
func snapshot(t *testing.T, c *redis.Client, ns string) string {
	t.Helper()
	ctx := context.Background()
	keys, err := c.Keys(ctx, keyspace.Namespace(ns).Pattern()).Result()
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		d, err := c.Dump(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%s=%x\n", k, d)
	}
	return b.String()
}

// TestEveryScriptNamesEveryRefusedRight runs every script of the table
// (lua.All), in both of its forms (an EVAL script and a Redis function),
// as Redis users that each lack one right the table says it
// needs: a command it runs, EVALSHA (FCALL), the namespace's keys, or (for a script
// that publishes) its channels and PUBLISH or SPUBLISH. Each refusal must
// change nothing, and aclright.Missing must name the right from the error
// Redis (or the script) gave. A user granted exactly the table's rights
// runs every scenario, so the table lists no more and no less than the
// script needs. Each script with a build for layout 2 (lua.Script.L2)
// runs again, as that build, on the layout's keys.
func TestEveryScriptNamesEveryRefusedRight(t *testing.T) {
	srv := redistest.Start(t, redistest.Config{})
	admin := srv.Client(t)
	runs := scenarios()
	for _, s := range lua.All {
		if runs[s.Name] == nil {
			t.Errorf("script %s has no scenario here: add the states that run each of its commands", s.Name)
		}
	}
	n := 0
	for _, entry := range lua.All {
		// A right is needed when some scenario of either build is refused
		// without it: the table lists the rights of both.
		refused := map[string]int{}
		for layout, s := range entry.Layouts() {
			layout++ // Layouts lists layout 1's build, then layout 2's
			runScript(t, admin, srv, runs[entry.Name], s, layout, &n, refused)
		}
		for _, key := range slices.Sorted(maps.Keys(refused)) {
			if refused[key] == 0 {
				t.Errorf("%s: no scenario of either layout was refused without %s: the script does not need it, or the scenarios miss the path that does",
					entry.Name, key)
			}
		}
	}
}

// runScript is TestEveryScriptNamesEveryRefusedRight for s, the build of
// a script for shards of layout layout, on its scenarios runs; refused
// counts, by "form/flavour: right", the scenarios refused without each
// right.
func runScript(t *testing.T, admin *redis.Client, srv *redistest.Server, runs []scenario, s *lua.Script, layout int, n *int,
	refused map[string]int) {
	ctx := context.Background()
	{
		for _, form := range []string{"eval", "function"} {
			for _, sharded := range []bool{false, true} {
				if sharded && !s.Publishes {
					continue
				}
				flavour, src, pub := "classic", s.Source, "publish"
				function, library := s.Function, s.Library
				if sharded {
					flavour, src, pub = "sharded", s.ShardedSource, "spublish"
					function, library = s.ShardedFunction, s.ShardedLibrary
				}
				script := redis.NewScript(src)
				// The rights to call the script at all: EVALSHA (with EVAL, as
				// go-redis's Run falls back to it) or FCALL.
				call, callRights := "evalsha", []any{"+evalsha", "+eval"}
				invoke := func(uc *redis.Client, keys []string, args ...any) error {
					return script.Run(ctx, uc, keys, args...).Err()
				}
				if form == "function" {
					if err := admin.FunctionLoadReplace(ctx, library).Err(); err != nil {
						t.Fatal(err)
					}
					call, callRights = "fcall", []any{"+fcall"}
					invoke = func(uc *redis.Client, keys []string, args ...any) error {
						return uc.FCall(ctx, function, keys, args...).Err()
					}
				}
				name := s.Name
				if layout == 2 {
					name += "/layout2"
				}
				t.Run(name+"/"+form+"/"+flavour, func(t *testing.T) {
					// Each right a user may lack, and the name Missing must give.
					type right struct{ name, want string }
					var rights []right
					if !sharded {
						for _, c := range s.Commands {
							rights = append(rights, right{c, "+" + c})
						}
						rights = append(rights, right{call, "+" + call}, right{"keys", "~timerq:{NS}:*"})
					}
					if s.Publishes {
						rights = append(rights, right{pub, "+" + pub}, right{"channels", "&timerq:{NS}:*"})
					}
					// exactly grants what the table lists; lacking one right,
					// everything but that right.
					grant := func(prefix string, lacking string) []any {
						r := []any{"reset", "on", ">pw"}
						if lacking == "" {
							r = append(r, callRights...)
							for _, c := range s.Commands {
								r = append(r, "+"+c)
							}
							if s.Publishes {
								r = append(r, "+"+pub)
							}
						} else {
							r = append(r, "+@all")
						}
						if lacking != "keys" {
							r = append(r, "~"+prefix+"*")
						}
						if lacking != "channels" {
							r = append(r, "&"+prefix+"*")
						}
						switch lacking {
						case "", "keys", "channels":
						case "evalsha":
							r = append(r, "-evalsha", "-eval")
						case "fcall":
							r = append(r, "-fcall")
						default:
							r = append(r, "-"+lacking)
						}
						return r
					}
					for _, rt := range append([]right{{name: ""}}, rights...) {
						key := form + "/" + flavour + ": " + rt.name
						for _, run := range runs {
							*n++
							ns := fmt.Sprintf("acl%d", *n)
							prefix := "timerq:{" + ns + "}:"
							sp := keyspace.Shard(ns, 0, 1).AtLayout(layout)
							user := "u" + ns
							if err := admin.Do(ctx, append([]any{"ACL", "SETUSER", user}, grant(prefix, rt.name)...)...).Err(); err != nil {
								t.Fatal(err)
							}
							uc := redis.NewClient(&redis.Options{Addr: srv.Addr(), Username: user, Password: "pw", MaxRetries: -1})
							run.setup(t, admin, sp)
							before := snapshot(t, admin, ns)
							err := invoke(uc, s.Keys(sp, "g"), run.args(sp)...)
							uc.Close()
							if rt.name == "" {
								if err != nil && err != redis.Nil {
									t.Errorf("%s: a user with exactly the table's rights: %v", run.name, err)
								}
								continue
							}
							if err == nil || err == redis.Nil {
								refused[key] += 0 // this scenario does not need the right
								continue
							}
							refused[key]++
							want := strings.ReplaceAll(rt.want, "NS", ns)
							// Valkey 8 names the subcommand a container command
							// was refused for ("+xgroup|create"), which the rule
							// "+xgroup" grants too.
							if got := aclright.Missing(err.Error(), ns); got != want && !strings.HasPrefix(got, want+"|") {
								t.Errorf("without %s, %s: Missing = %q, want %q; Redis said: %v", rt.name, run.name, got, want, err)
							}
							if after := snapshot(t, admin, ns); after != before {
								t.Errorf("without %s, %s: the refused script wrote:\nbefore:\n%s\nafter:\n%s", rt.name, run.name, before, after)
							}
						}
					}
				})
			}
		}
	}
}
