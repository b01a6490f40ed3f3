package queue_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/timerq/timerq/internal/consistency"
	"github.com/timerq/timerq/internal/keyspace"
	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/queue"
)

// mustBeConsistent fails the test when the namespace breaks an invariant.
func mustBeConsistent(t *testing.T, rdb redis.UniversalClient, q *queue.Queue, what string) {
	t.Helper()
	bad, err := consistency.Check(context.Background(), rdb, q, false)
	if err != nil {
		t.Fatalf("%s: consistency check: %v", what, err)
	}
	if len(bad) > 0 {
		t.Fatalf("%s left the namespace inconsistent:\n%s", what, strings.Join(bad, "\n"))
	}
}

func snapshot(t *testing.T, rdb redis.UniversalClient, q *queue.Queue) string {
	t.Helper()
	s, err := consistency.Snapshot(context.Background(), rdb, q)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// aclUser is a Redis user lacking one right timerq needs.
type aclUser struct {
	name  string
	rules func(prefix string, keys []string) []string
	// want is in the error of every operation that needs the right, and of
	// CheckPermissions; empty for a user lacking nothing.
	want string
	// fails lists those operations; fails2, when not nil, those on a
	// shard of layout 2, where they differ.
	fails, fails2 map[string]bool
	// pubsub is the flavour the user's queue uses: a user lacking PUBLISH
	// is refused only with classic pub/sub, one lacking SPUBLISH only with
	// sharded (the default on Redis 7).
	pubsub queue.PubSubMode
}

func readOnlyKey(i int) func(string, []string) []string {
	return func(prefix string, keys []string) []string {
		r := []string{"&" + prefix + "*", "+@all"}
		for j, k := range keys {
			if j == i {
				r = append(r, "%R~"+k)
			} else {
				r = append(r, "~"+k)
			}
		}
		return r
	}
}

func setOf(ops ...string) map[string]bool {
	m := map[string]bool{}
	for _, op := range ops {
		m[op] = true
	}
	return m
}

// allOps in the order the test runs them: each that publishes moves the
// earliest due time earlier, whatever the ones before did.
var allOps = []string{"schedule", "batch", "cancel", "reschedule", "fire-now", "claim", "purge"}

// allBut grants the namespace's keys and channels and every command but
// the ones given.
func allBut(minus ...string) func(string, []string) []string {
	return func(prefix string, _ []string) []string {
		return append([]string{"~" + prefix + "*", "&" + prefix + "*", "+@all"}, minus...)
	}
}

func aclUsers(prefix string) []aclUser {
	publishing := setOf("schedule", "batch", "claim", "cancel", "reschedule", "fire-now")
	return []aclUser{{
		// The reproduction: key rights and every command, but no
		// channel, which is what Redis 7 gives by default (resetchannels).
		name:  "nochannels",
		rules: func(prefix string, _ []string) []string { return []string{"~" + prefix + "*", "+@all"} },
		want:  "may not publish to the channel " + prefix, fails: publishing,
	}, {
		name: "nopublish", rules: allBut("-publish"), want: "may not run PUBLISH", fails: publishing, pubsub: queue.PubSubClassic,
	}, {
		name: "nospublish", rules: allBut("-spublish"), want: "may not run SPUBLISH", fails: publishing, pubsub: queue.PubSubSharded,
	}, {
		// Redis refuses EVALSHA itself when a key it declares is
		// read-only, as a script may write its keys: the refusal names
		// no key, so the hint gives the rule for all of them.
		name: "readonly-fires", rules: readOnlyKey(5), want: "~" + prefix + "*", fails: setOf(allOps...),
	}, {
		name: "noxadd", rules: allBut("-xadd"), want: "may not run XADD", fails: setOf("claim"),
	}, {
		name: "nohset", rules: allBut("-hset"), want: "may not run HSET",
		fails: setOf("schedule", "batch", "claim", "cancel"),
	}, {
		// Valkey names the user in a command refusal: a name holding
		// "key" and "channel" must not make it a key's or a channel's.
		name: "monkey-channel-nohset", rules: allBut("-hset"), want: "may not run HSET",
		fails: setOf("schedule", "batch", "claim", "cancel"),
	}, {
		name: "nohincrby", rules: allBut("-hincrby"), want: "may not run HINCRBY", fails: setOf("claim"),
	}, {
		// Layout 2's purge runs ZREM and HDEL alone: its settled timers
		// are members of the sched set, not ranks of an expire set.
		name: "nozremrangebyrank", rules: allBut("-zremrangebyrank"), want: "may not run ZREMRANGEBYRANK",
		fails: setOf("claim", "purge"), fails2: setOf("claim"),
	}, {
		// Scripts run as Redis functions where the user may (FCALL and
		// FUNCTION LOAD), else by EVALSHA and EVAL, which a user needs at
		// least.
		name: "noevalsha", rules: allBut("-evalsha", "-eval", "-fcall"), want: "+eval", fails: setOf(allOps...),
	}, {
		name: "nofcall", rules: allBut("-fcall"), fails: setOf(),
	}, {
		name: "nofunctionload", rules: allBut("-function|load"), fails: setOf(),
	}, {
		// Only Wait and pollers subscribe: CheckPermissions catches it.
		name: "nosubscribe", rules: allBut("-subscribe"), want: "+subscribe", fails: setOf(), pubsub: queue.PubSubClassic,
	}, {
		name: "nossubscribe", rules: allBut("-ssubscribe"), want: "+ssubscribe", fails: setOf(), pubsub: queue.PubSubSharded,
	}, {
		name: "everything", rules: allBut(), fails: setOf(),
	}}
}

// TestRefusedCommandChangesNothing runs every mutating operation as users
// that each lack one right. An operation that needs the right fails with
// ErrPermission naming it and changes nothing; every operation leaves the
// namespace consistent.
func TestRefusedCommandChangesNothing(t *testing.T) {
	srv := redistest.Start(t, redistest.Config{})
	admin := srv.Client(t)
	ctx := context.Background()
	for _, u := range aclUsers("") {
		t.Run(u.name, func(t *testing.T) {
			ns := redistest.Namespace(t)
			prefix := "timerq:{" + ns + "}:"
			u := func() aclUser {
				for _, v := range aclUsers(prefix) {
					if v.name == u.name {
						return v
					}
				}
				panic(u.name)
			}()
			// Settled records of the admin expire at once, for purge.
			aq, err := queue.New(admin, queue.Options{Namespace: ns, Retention: time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			defer aq.Close()
			// The keys as the shard's layout names them (a rule on
			// layout 1's names would refuse layout 2's sched set anyway).
			keys := keysAt(t, aq, 0)
			if spaceAt(t, admin, aq, 0).Layout() == 2 && u.fails2 != nil {
				u.fails = u.fails2
			}
			args := append([]any{"ACL", "SETUSER", u.name, "reset", "on", ">pw"}, toAny(u.rules(prefix, keys))...)
			if err := admin.Do(ctx, args...).Err(); err != nil {
				t.Fatalf("ACL SETUSER: %v", err)
			}
			uc := redis.NewClient(&redis.Options{Addr: srv.Addr(), Username: u.name, Password: "pw"})
			defer uc.Close()
			// The user's retention is the admin's too: layout 1 purges a
			// timer at the time its settling wrote, layout 2 applies the
			// purging queue's retention to the time it settled.
			uq, err := queue.New(uc, queue.Options{Namespace: ns, Retention: time.Millisecond, PubSub: u.pubsub})
			if err != nil {
				t.Fatal(err)
			}
			defer uq.Close()

			// CheckPermissions names the missing right before any operation
			// needs it.
			if err := uq.CheckPermissions(ctx); u.want == "" && err != nil {
				t.Errorf("CheckPermissions: %v", err)
			} else if u.want != "" && (!errors.Is(err, queue.ErrPermission) || !strings.Contains(err.Error(), u.want)) {
				t.Errorf("CheckPermissions = %v, want ErrPermission naming %q", err, u.want)
			}

			// Something pending far ahead, so that each operation below moves
			// the earliest due time earlier and must publish.
			later := time.Now().Add(24 * time.Hour)
			if _, err := aq.Schedule(ctx, "anchor", later, nil); err != nil {
				t.Fatal(err)
			}
			setup := map[string]func(){
				"claim": func() {
					for i := range 3 {
						if _, err := aq.Schedule(ctx, fmt.Sprint("due-", i), time.Now().Add(-time.Second), []byte("p")); err != nil {
							t.Fatal(err)
						}
					}
				},
				"cancel":     func() { schedule(t, aq, "c1", later.Add(-time.Hour)) },
				"reschedule": func() { schedule(t, aq, "r1", later.Add(time.Hour)) },
				"fire-now":   func() { schedule(t, aq, "f1", later.Add(time.Hour)) },
				"purge": func() {
					schedule(t, aq, "p1", time.Now().Add(-time.Second))
					schedule(t, aq, "p2", later)
					if _, err := aq.Cancel(ctx, "p2"); err != nil {
						t.Fatal(err)
					}
					claimAll(t, aq)
					// Past the 1 ms retention by the server's clock.
					now, err := admin.Time(ctx).Result()
					if err != nil {
						t.Fatal(err)
					}
					awaitServerTime(t, admin, now.Add(2*time.Millisecond))
				},
			}
			run := map[string]func() error{
				"schedule": func() error { _, err := uq.Schedule(ctx, "s1", time.Now().Add(time.Minute), []byte("x")); return err },
				"batch": func() error {
					// Two script calls in one pipeline (500 timers each at most).
					var b []queue.NewTimer
					for i := range 600 {
						b = append(b, queue.NewTimer{ID: fmt.Sprint("b-", i), Due: time.Now().Add(time.Minute), Payload: []byte("y")})
					}
					_, err := uq.ScheduleBatch(ctx, b)
					return err
				},
				"claim": func() error {
					res, err := uq.Engine().Claim(ctx, 10)
					if err == nil && len(res.Fired) < 3 {
						t.Errorf("claim fired %d, want at least 3", len(res.Fired))
					}
					return err
				},
				"cancel":     func() error { _, err := uq.Cancel(ctx, "c1"); return err },
				"reschedule": func() error { _, err := uq.Reschedule(ctx, "r1", time.Now().Add(30*time.Second)); return err },
				"fire-now":   func() error { _, err := uq.FireNow(ctx, "f1"); return err },
				"purge": func() error {
					n, _, err := uq.Engine().Purge(ctx, 10)
					if err == nil && n < 2 {
						t.Errorf("purge removed %d, want at least 2", n)
					}
					return err
				},
			}
			for _, op := range allOps {
				if s := setup[op]; s != nil {
					s()
				}
				before := snapshot(t, admin, aq)
				err := run[op]()
				after := snapshot(t, admin, aq)
				switch {
				case u.fails[op] && err == nil:
					t.Errorf("%s succeeded", op)
				case u.fails[op]:
					if !errors.Is(err, queue.ErrPermission) || !strings.Contains(err.Error(), u.want) {
						t.Errorf("%s: error %q does not wrap ErrPermission or lacks %q", op, err, u.want)
					}
					if before != after {
						t.Errorf("%s was refused but changed the namespace:\nbefore:\n%s\nafter:\n%s", op, before, after)
					}
				case err != nil:
					t.Errorf("%s: %v", op, err)
				}
				mustBeConsistent(t, admin, aq, u.name+" "+op)
			}
			// The admin can still do everything to what the user left.
			claimAll(t, aq)
			mustBeConsistent(t, admin, aq, "the admin's claim")
		})
	}
}

func toAny(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}

func schedule(t *testing.T, q *queue.Queue, id string, due time.Time) {
	t.Helper()
	if _, err := q.Schedule(context.Background(), id, due, nil); err != nil {
		t.Fatal(err)
	}
}

// TestOutOfMemory fills a Redis past maxmemory with noeviction: schedule,
// cancel and reschedule fail with ErrOutOfMemory and write nothing, while
// claims keep firing and purges free memory, until schedules work again.
func TestOutOfMemory(t *testing.T) {
	srv := redistest.Start(t, redistest.Config{})
	rdb := srv.Client(t)
	ctx := context.Background()
	q, err := queue.New(rdb, queue.Options{Namespace: redistest.Namespace(t), Retention: time.Millisecond, StreamMaxLen: 10})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	payload := []byte(strings.Repeat("p", 8<<10))
	var batch []queue.NewTimer
	for i := range 400 {
		batch = append(batch, queue.NewTimer{ID: fmt.Sprint("m-", i), Due: time.Now().Add(-time.Second), Payload: payload})
	}
	if _, err := q.ScheduleBatch(ctx, batch); err != nil {
		t.Fatal(err)
	}
	schedule(t, q, "later", time.Now().Add(time.Hour))
	dbo := queue.DebounceOptions{Delay: time.Minute, MaxWait: time.Hour, Payload: []byte("first")}
	open, err := q.Debounce(ctx, "open", dbo)
	if err != nil {
		t.Fatal(err)
	}
	used := usedMemory(t, rdb)
	limit := used - 512<<10
	if err := rdb.ConfigSet(ctx, "maxmemory-policy", "noeviction").Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.ConfigSet(ctx, "maxmemory", strconv.FormatInt(limit, 10)).Err(); err != nil {
		t.Fatal(err)
	}

	before := snapshot(t, rdb, q)
	for name, op := range map[string]func() error{
		"schedule":   func() error { _, err := q.Schedule(ctx, "new", time.Now(), nil); return err },
		"cancel":     func() error { _, err := q.Cancel(ctx, "later"); return err },
		"reschedule": func() error { _, err := q.Reschedule(ctx, "later", time.Now()); return err },
		"fire-now":   func() error { _, err := q.FireNow(ctx, "later"); return err },
		"debounce a new key": func() error {
			_, err := q.Debounce(ctx, "new", dbo)
			return err
		},
		"debounce the open window": func() error {
			_, err := q.Debounce(ctx, "open", queue.DebounceOptions{Delay: time.Second, MaxWait: time.Hour, Payload: []byte("second")})
			return err
		},
		"restore a debounce window": func() error {
			w := open.Timer
			w.ID = queue.DebounceID("restored", 1000)
			_, err := q.RestoreDebounce(ctx, queue.RestoredWindow{Timer: w, Deadline: time.Now().Add(time.Hour)})
			return err
		},
	} {
		err := op()
		if !errors.Is(err, queue.ErrOutOfMemory) {
			t.Errorf("%s over maxmemory = %v, want ErrOutOfMemory", name, err)
			continue
		}
		// The advice must not be what was just refused.
		if _, advice, _ := strings.Cut(err.Error(), "maxmemory'"); strings.Contains(advice, "cancel") {
			t.Errorf("%s over maxmemory advises a cancel, which is refused too: %v", name, err)
		}
	}
	// A batch of existing IDs is only a read, so it succeeds.
	if _, err := q.ScheduleBatch(ctx, batch[:2:2]); err != nil {
		t.Errorf("batch of existing timers over maxmemory = %v", err)
	}
	if _, err := q.ScheduleBatch(ctx, []queue.NewTimer{{ID: "new-1", Due: time.Now()}, {ID: "new-2", Due: time.Now()}}); !errors.Is(err, queue.ErrOutOfMemory) {
		t.Errorf("batch of new timers over maxmemory = %v, want ErrOutOfMemory", err)
	}
	if after := snapshot(t, rdb, q); after != before {
		t.Fatalf("refused operations changed the namespace:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	if n, err := rdb.Exists(ctx, keyspace.Shard(q.Namespace(), 0, 1).Debounce("new")).Result(); n != 0 || err != nil {
		t.Errorf("a refused debounce wrote its window: %d %v", n, err)
	}
	if got, err := q.Get(ctx, open.Timer.ID); err != nil || !got.Due.Equal(open.Timer.Due) || string(got.Payload) != "first" {
		t.Errorf("a refused push changed the window's timer: %+v %v", got, err)
	}

	// Claims run on: their first write cannot be refused.
	if fired := claimAll(t, q); len(fired) != 400 {
		t.Fatalf("claims over maxmemory fired %d, want 400", len(fired))
	}
	bad, err := consistency.Check(ctx, rdb, q, true)
	if err != nil || len(bad) > 0 {
		t.Fatalf("after claims over maxmemory: %v %v", bad, err)
	}
	// Past the 1 ms retention by the server's clock.
	now, err := rdb.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	awaitServerTime(t, rdb, now.Add(2*time.Millisecond))
	high := usedMemory(t, rdb)
	n, _, err := q.Engine().Purge(ctx, queue.MaxBatch)
	if err != nil || n != 400 {
		t.Fatalf("purge over maxmemory = %d, %v; want 400 removed", n, err)
	}
	low := usedMemory(t, rdb)
	if low >= limit {
		t.Fatalf("purge freed %d bytes, from %d to %d: still over maxmemory %d", high-low, high, low, limit)
	}
	if _, err := q.Schedule(ctx, "new", time.Now().Add(time.Hour), nil); err != nil {
		t.Fatalf("schedule after the purge freed memory: %v", err)
	}
}

func usedMemory(t *testing.T, rdb *redis.Client) int64 {
	t.Helper()
	info, err := rdb.Info(context.Background(), "memory").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "used_memory:"); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	t.Fatal("no used_memory in INFO memory")
	return 0
}

func TestCheckPermissionsPassesWithEveryRight(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		q := newQueue(t, b, queue.Options{})
		if err := q.CheckPermissions(context.Background()); err != nil {
			t.Fatal(err)
		}
		if keys := nsKeys(t, b, q); len(keys) != 0 {
			t.Fatalf("CheckPermissions wrote %v", keys)
		}
	})
}

// TestMalformedRecordChangesNothing plants records timerq never writes: every
// script that would rewrite one at a caller's request fails with
// ErrMalformedRecord, naming the timer, before its first write. (The claim,
// which no caller aims at one timer, quarantines it instead:
// TestMalformedRecordIsQuarantined.)
func TestMalformedRecordChangesNothing(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		q := newQueue(t, b, queue.Options{})
		k := keysAt(t, q, 0)
		past := time.Now().Add(-time.Second)
		schedule(t, q, "good", past)
		if err := b.Client.HSet(ctx, k[1], "bad", "garbage").Err(); err != nil {
			t.Fatal(err)
		}
		if err := b.Client.ZAdd(ctx, k[0], redis.Z{Score: float64(past.UnixMilli()), Member: "bad"}).Err(); err != nil {
			t.Fatal(err)
		}
		before := snapshot(t, b.Client, q)
		for name, op := range map[string]func() error{
			"cancel":     func() error { _, err := q.Cancel(ctx, "bad"); return err },
			"reschedule": func() error { _, err := q.Reschedule(ctx, "bad", time.Now()); return err },
			"batch": func() error {
				_, err := q.ScheduleBatch(ctx, []queue.NewTimer{{ID: "new", Due: past}, {ID: "bad", Due: past}})
				return err
			},
			"get": func() error { _, err := q.Get(ctx, "bad"); return err },
		} {
			if err := op(); !errors.Is(err, queue.ErrMalformedRecord) || !strings.Contains(err.Error(), `"bad"`) {
				t.Errorf("%s: %v, want ErrMalformedRecord naming the timer", name, err)
			}
		}
		if after := snapshot(t, b.Client, q); after != before {
			t.Fatalf("changed the namespace:\nbefore:\n%s\nafter:\n%s", before, after)
		}

		// A scheduled record without a due time, as an older timerq could
		// leave: cancel refuses it; reschedule mends it.
		if err := b.Client.HSet(ctx, k[1], "legacy", "s::1000::p").Err(); err != nil {
			t.Fatal(err)
		}
		if _, err := q.Cancel(ctx, "legacy"); !errors.Is(err, queue.ErrMalformedRecord) {
			t.Errorf("cancel of a scheduled record without due time: %v", err)
		}
		if _, err := q.ScheduleBatch(ctx, []queue.NewTimer{{ID: "new", Due: past}, {ID: "legacy", Due: past}}); !errors.Is(err, queue.ErrMalformedRecord) {
			t.Errorf("schedule of a scheduled record without due time: %v", err)
		}
		if _, err := q.Get(ctx, "new"); !errors.Is(err, queue.ErrNotFound) {
			t.Errorf("the batch with the bad record created its other timer: %v", err)
		}
		if _, err := q.Reschedule(ctx, "legacy", time.Now().Add(time.Hour)); err != nil {
			t.Errorf("reschedule of a scheduled record without due time: %v", err)
		}
		// The claim quarantines bad and fires good.
		if fired := claimAll(t, q); len(fired) != 1 || fired[0].ID != "good" {
			t.Fatalf("fired %v, want good", fired)
		}
		mustBeConsistent(t, b.Client, q, "claim after the quarantine")
	})
}

// TestWaitTreatsMessagesAsHints publishes a wakeup for a timer that has not
// fired, as a script refused after its PUBLISH could: the waiter re-reads
// the state and keeps waiting.
func TestWaitTreatsMessagesAsHints(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		q := newQueue(t, b, queue.Options{RecheckInterval: time.Hour})
		schedule(t, q, "w", time.Now().Add(time.Hour))
		w := waitAsync(ctx, q, "w")
		redistest.Eventually(t, 5*time.Second, "the waiter's subscription", func() bool { return queue.WaitSubscribed(q, "w") })
		for _, msg := range []string{"fired", "cancelled"} {
			if err := b.Client.Publish(ctx, q.Keys().Timer("w"), msg).Err(); err != nil {
				t.Fatal(err)
			}
		}
		mustNotReturn(t, w, 300*time.Millisecond)
		if _, err := q.FireNow(ctx, "w"); err != nil {
			t.Fatal(err)
		}
		claimAll(t, q)
		if err := mustReturn(t, w, 5*time.Second); err != nil {
			t.Fatalf("Wait = %v", err)
		}
	})
}

// TestReadOnlyReplicaIsNotAPermissionError: a replica refuses the first
// write with READONLY ("You can't write…"), which is neither an ACL
// refusal nor a half-write.
func TestReadOnlyReplicaIsNotAPermissionError(t *testing.T) {
	primary := redistest.Start(t, redistest.Config{})
	host, port, _ := strings.Cut(primary.Addr(), ":")
	replica := redistest.Start(t, redistest.Config{Args: []string{"--replicaof", host, port}})
	rdb := replica.Client(t)
	q, err := queue.New(rdb, queue.Options{Namespace: redistest.Namespace(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	_, err = q.Schedule(context.Background(), "x", time.Now(), nil)
	if err == nil || errors.Is(err, queue.ErrPermission) || !strings.Contains(err.Error(), "READONLY") {
		t.Fatalf("Schedule on a replica = %v, want READONLY and not ErrPermission", err)
	}
}
