package aclright_test

import (
	"context"
	"fmt"
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

// scriptCase is one script as the test runs it: its source, its keys, and
// scenarios that together run every command the script may run.
type scriptCase struct {
	name      string
	src       string
	keys      func(sp keyspace.Space) []string
	publishes bool
	// cmds are the commands the script runs, each of which Redis may refuse.
	cmds []string
	runs []scenario
}

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

func timerKeys(sp keyspace.Space) []string { return sp.Keys() }

// scriptCases lists every script timerq runs.
func scriptCases() []scriptCase {
	nothing := func(*testing.T, *redis.Client, keyspace.Space) {}
	return []scriptCase{{
		name: "schedule", src: lua.Schedule, publishes: true,
		keys: func(sp keyspace.Space) []string { return append(sp.Keys(), sp.Traces()) },
		cmds: []string{"type", "time", "zrange", "hmget", "zscore", "zadd", "hset"},
		runs: []scenario{{
			setup: func(t *testing.T, c *redis.Client, sp keyspace.Space) { scheduled(t, c, sp, "old", ms(time.Hour)) },
			args: func(sp keyspace.Space) []any {
				return []any{sp.Wake(), tp, "old", ms(time.Hour), "p", "new", "+1000.000", "p"}
			},
		}},
	}, {
		name: "claim", src: lua.Claim, publishes: true,
		keys: func(sp keyspace.Space) []string { return append(sp.Keys(), sp.Traces(), sp.Quarantine()) },
		cmds: []string{"type", "time", "zrangebyscore", "hmget", "zremrangebyrank", "hset", "zadd", "xadd", "xtrim", "hincrby", "hdel", "zrange"},
		runs: []scenario{{
			setup: func(t *testing.T, c *redis.Client, sp keyspace.Space) {
				scheduled(t, c, sp, "due", ms(-time.Second))
				do(t, c, "HSET", sp.Traces(), "due", tp)
				do(t, c, "HSET", sp.Timers(), "bad", "not a record")
				do(t, c, "ZADD", sp.Due(), ms(-time.Second), "bad")
			},
			args: func(sp keyspace.Space) []any { return []any{10, 60000, 1000, sp.TimerChannelPrefix(), sp.Notify()} },
		}},
	}, {
		name: "cancel", src: lua.Cancel, publishes: true, keys: timerKeys,
		cmds: []string{"type", "hget", "zscore", "time", "zadd", "hset", "zrem"},
		runs: []scenario{{
			setup: func(t *testing.T, c *redis.Client, sp keyspace.Space) { scheduled(t, c, sp, "c", ms(time.Hour)) },
			args:  func(sp keyspace.Space) []any { return []any{"c", 60000, sp.TimerChannel("c")} },
		}},
	}, {
		name: "reschedule", src: lua.Reschedule, publishes: true, keys: timerKeys,
		cmds: []string{"type", "hget", "time", "zrange", "zadd", "zscore"},
		runs: []scenario{{
			setup: func(t *testing.T, c *redis.Client, sp keyspace.Space) { scheduled(t, c, sp, "r", ms(time.Hour)) },
			args:  func(sp keyspace.Space) []any { return []any{"r", "+1000.000", sp.Wake()} },
		}},
	}, {
		name: "purge", src: lua.Purge, keys: func(sp keyspace.Space) []string { return append(sp.Keys(), sp.Traces()) },
		cmds: []string{"type", "time", "zrangebyscore", "zremrangebyrank", "hdel", "zrem", "zcount"},
		runs: []scenario{{
			setup: func(t *testing.T, c *redis.Client, sp keyspace.Space) {
				do(t, c, "HSET", sp.Timers(), "p", "c:1000:1000:2000:x")
				do(t, c, "ZADD", sp.Cancelled(), 1000, "p")
				do(t, c, "ZADD", sp.Expire(), 3000, "p")
				do(t, c, "HSET", sp.Traces(), "p", tp)
			},
			args: func(keyspace.Space) []any { return []any{10} },
		}},
	}, {
		name: "stats", src: lua.Stats, keys: timerKeys,
		cmds: []string{"type", "time", "zrange", "zcard", "zcount"},
		runs: []scenario{{setup: nothing, args: func(keyspace.Space) []any { return nil }}},
	}, {
		name: "list", src: lua.List, keys: timerKeys,
		cmds: []string{"type", "zscore", "zrank", "zrange", "zrangebyscore", "hmget"},
		runs: []scenario{{
			setup: func(t *testing.T, c *redis.Client, sp keyspace.Space) {
				scheduled(t, c, sp, "a", "1000")
				scheduled(t, c, sp, "b", "2000")
			},
			args: func(keyspace.Space) []any { return []any{"", 0, ms(time.Hour), 10, 1000, "a"} },
		}},
	}, {
		name: "get", src: lua.Get, keys: timerKeys,
		cmds: []string{"type", "hget", "zscore"},
		runs: []scenario{{
			setup: func(t *testing.T, c *redis.Client, sp keyspace.Space) { scheduled(t, c, sp, "g", "1000") },
			args:  func(keyspace.Space) []any { return []any{"g"} },
		}},
	}, {
		name: "check", src: lua.Check, publishes: true, keys: timerKeys,
		cmds: []string{"type", "time", "zrange", "zrangebyscore", "zscore", "zcount", "zcard", "hget", "hmget",
			"zremrangebyrank", "zadd", "zrem", "hset", "hdel", "xadd", "xtrim", "hincrby"},
		runs: []scenario{{setup: nothing, args: func(sp keyspace.Space) []any { return []any{sp.TimerChannel(""), sp.Wake()} }}},
	}, {
		name: "restore", src: lua.Restore, publishes: true,
		keys: func(sp keyspace.Space) []string { return append(sp.Keys(), sp.Schedules()) },
		cmds: []string{"type", "zrange", "hget", "zscore", "hset", "zadd"},
		runs: []scenario{{
			setup: func(t *testing.T, c *redis.Client, sp keyspace.Space) {
				scheduled(t, c, sp, "old", ms(time.Hour))
				do(t, c, "HSET", sp.Schedules(), "sch", "1:a:0::::{}")
			},
			args: func(sp keyspace.Space) []any {
				return []any{60000, sp.Wake(), "",
					"old", "s", ms(time.Hour), "1000", "", "p",
					"new", "s", ms(time.Minute), "1000", "", "p",
					"sch@5", "f", "5", "1000", "2000", "p"}
			},
		}},
	}, {
		name: "requeue", src: lua.Requeue, keys: func(sp keyspace.Space) []string { return []string{sp.Fires(), sp.DeadLetter()} },
		cmds: []string{"type", "xrange", "xadd", "xdel"},
		runs: []scenario{{
			setup: func(t *testing.T, c *redis.Client, sp keyspace.Space) {
				do(t, c, "XADD", sp.DeadLetter(), "5-1", "id", "x", "payload", "p", "group", "g", "error", "e")
			},
			args: func(keyspace.Space) []any { return []any{"5-1"} },
		}},
	}, {
		name: "heartbeat", src: lua.Heartbeat, keys: nsKeys,
		cmds: []string{"type", "time", "hset", "zadd", "zrem", "zremrangebyscore", "zrange"},
		runs: []scenario{
			{name: "stay", setup: nothing, args: func(keyspace.Space) []any { return []any{"w1", 10000, "0"} }},
			{name: "leave", setup: func(t *testing.T, c *redis.Client, sp keyspace.Space) {
				do(t, c, "ZADD", keyspace.Namespace(nsOf(sp)).Workers(), ms(time.Hour), "w1")
			}, args: func(keyspace.Space) []any { return []any{"w1", 10000, "1"} }},
		},
	}, {
		name: "workers", src: lua.Workers, keys: nsKeys,
		cmds: []string{"type", "time", "hmget", "zrangebyscore"},
		runs: []scenario{{setup: nothing, args: func(keyspace.Space) []any { return nil }}},
	}, {
		name: "overlap", src: lua.Overlap,
		keys: func(sp keyspace.Space) []string {
			return []string{sp.Fires(), sp.Schedules(), sp.Overlap("g"), sp.Counters()}
		},
		cmds: []string{"type", "hget", "xpending", "xack", "hincrby", "hset", "hdel"},
		runs: []scenario{{
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
	}, {
		name: "recur_load", src: lua.RecurLoad, keys: recurKeys,
		cmds: []string{"type", "time", "zrangebyscore", "hget", "zscore", "zadd"},
		runs: []scenario{{
			setup: func(t *testing.T, c *redis.Client, sp keyspace.Space) {
				do(t, c, "HSET", sp.Schedules(), "rs", "1:a:1:100:100:{}")
				scheduled(t, c, sp, "rs@100", ms(-time.Hour))
				do(t, c, "ZADD", sp.SchedDue(), ms(-time.Hour), "rs")
			},
			args: func(keyspace.Space) []any { return []any{"due", 0, 10} },
		}},
	}, {
		name: "recur_arm", src: lua.RecurArm, publishes: true, keys: recurKeys,
		cmds: []string{"type", "time", "zrange", "hget", "zscore", "hset", "zadd", "zrem"},
		runs: []scenario{{
			setup: func(t *testing.T, c *redis.Client, sp keyspace.Space) {
				do(t, c, "HSET", sp.Schedules(), "ra", "1:a:1:100:100:{}", "rb", "1:a:1:100:100:{}")
				scheduled(t, c, sp, "ra@100", ms(time.Hour))
				do(t, c, "ZADD", sp.SchedDue(), ms(time.Hour), "ra", ms(time.Hour), "rb")
			},
			args: func(sp keyspace.Space) []any {
				return []any{sp.Wake(), "ra", 1, 100, 200, "a", "p", 1, 200, ms(time.Minute),
					"rb", 1, 100, 100, "e", "p", 0}
			},
		}},
	}, {
		name: "recur_put", src: lua.RecurPut, publishes: true, keys: recurKeys,
		cmds: []string{"type", "time", "hget", "zscore", "zrange", "hset", "zrem", "zadd", "hdel"},
		runs: []scenario{{
			name: "update",
			setup: func(t *testing.T, c *redis.Client, sp keyspace.Space) {
				do(t, c, "HSET", sp.Schedules(), "rp", "1:a:1:100:100:{}")
				scheduled(t, c, sp, "rp@100", ms(time.Hour))
				do(t, c, "ZADD", sp.SchedDue(), ms(time.Hour), "rp")
			},
			args: func(sp keyspace.Space) []any {
				return []any{"update", "rp", "", "{}", "a", "300", "p", sp.Wake(), sp.TimerChannelPrefix(), 60000, 300, ms(time.Minute)}
			},
		}, {
			name: "delete",
			setup: func(t *testing.T, c *redis.Client, sp keyspace.Space) {
				do(t, c, "HSET", sp.Schedules(), "rp", "1:a:0:::{}")
				do(t, c, "ZADD", sp.SchedDue(), ms(time.Hour), "rp")
			},
			args: func(sp keyspace.Space) []any {
				return []any{"delete", "rp", "", "", "a", "-", "", sp.Wake(), sp.TimerChannelPrefix(), 60000}
			},
		}},
	}}
}

func nsOf(sp keyspace.Space) string {
	tag := sp.HashTag()
	return strings.SplitN(tag[1:len(tag)-1], ":", 2)[0]
}

func nsKeys(sp keyspace.Space) []string {
	ns := keyspace.Namespace(nsOf(sp))
	return []string{ns.Workers(), ns.WorkersSeen()}
}

func recurKeys(sp keyspace.Space) []string { return append(sp.Keys(), sp.Schedules(), sp.SchedDue()) }

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

// TestEveryScriptNamesEveryRefusedRight runs every script of timerq as
// Redis users that each lack one right the script needs: a command it runs,
// EVALSHA, the namespace's keys, or (for a script that publishes) its
// channels and PUBLISH or SPUBLISH. Each refusal must change nothing, and
// aclright.Missing must name the right from the error Redis (or the
// script) gave. A user granted exactly those rights runs every scenario.
func TestEveryScriptNamesEveryRefusedRight(t *testing.T) {
	srv := redistest.Start(t, redistest.Config{})
	admin := srv.Client(t)
	ctx := context.Background()
	n := 0
	for _, sc := range scriptCases() {
		for _, sharded := range []bool{false, true} {
			if sharded && !sc.publishes {
				continue
			}
			flavour, src, pub := "classic", sc.src, "publish"
			if sharded {
				flavour, src, pub = "sharded", lua.Sharded(sc.src), "spublish"
			}
			script := redis.NewScript(src)
			t.Run(sc.name+"/"+flavour, func(t *testing.T) {
				// rights maps each right to the ACL rules a user lacking it
				// gets (beyond reset) and to the name Missing must give.
				type right struct{ name, want string }
				var rights []right
				if !sharded {
					for _, c := range sc.cmds {
						rights = append(rights, right{c, "+" + c})
					}
					rights = append(rights, right{"evalsha", "+evalsha"}, right{"keys", "~timerq:{NS}:*"})
				}
				if sc.publishes {
					rights = append(rights, right{pub, "+" + pub}, right{"channels", "&timerq:{NS}:*"})
				}
				grant := func(prefix string, lacking string) []any {
					r := []any{"reset", "on", ">pw", "+@all"}
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
					default:
						r = append(r, "-"+lacking)
					}
					return r
				}
				for _, rt := range append([]right{{name: ""}}, rights...) {
					refused := 0
					for _, run := range sc.runs {
						n++
						ns := fmt.Sprintf("acl%d", n)
						prefix := "timerq:{" + ns + "}:"
						sp := keyspace.Shard(ns, 0, 1)
						user := "u" + ns
						if err := admin.Do(ctx, append([]any{"ACL", "SETUSER", user}, grant(prefix, rt.name)...)...).Err(); err != nil {
							t.Fatal(err)
						}
						uc := redis.NewClient(&redis.Options{Addr: srv.Addr(), Username: user, Password: "pw", MaxRetries: -1})
						run.setup(t, admin, sp)
						before := snapshot(t, admin, ns)
						err := script.Run(ctx, uc, sc.keys(sp), run.args(sp)...).Err()
						uc.Close()
						if rt.name == "" {
							if err != nil && err != redis.Nil {
								t.Errorf("%s: a user with every right: %v", run.name, err)
							}
							continue
						}
						if err == nil || err == redis.Nil {
							continue // this scenario does not need the right
						}
						refused++
						want := strings.ReplaceAll(rt.want, "NS", ns)
						if got := aclright.Missing(err.Error(), ns); got != want {
							t.Errorf("without %s, %s: Missing = %q, want %q; Redis said: %v", rt.name, run.name, got, want, err)
						}
						if after := snapshot(t, admin, ns); after != before {
							t.Errorf("without %s, %s: the refused script wrote:\nbefore:\n%s\nafter:\n%s", rt.name, run.name, before, after)
						}
					}
					if rt.name != "" && refused == 0 {
						t.Errorf("no scenario was refused without %s: the script does not need it, or the scenarios miss the path that does", rt.name)
					}
				}
			})
		}
	}
}
