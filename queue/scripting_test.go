package queue_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/queue"
)

// commandCalls returns how many times the server ran each command, from
// INFO commandstats (cmdstat_fcall:calls=3,... -> "fcall": 3).
func commandCalls(t *testing.T, rdb redis.Cmdable) map[string]int {
	t.Helper()
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	calls := map[string]int{}
	for _, line := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		v, _, _ := strings.Cut(strings.TrimPrefix(rest, "calls="), ",")
		calls[strings.TrimPrefix(name, "cmdstat_")], _ = strconv.Atoi(v)
	}
	return calls
}

// scheduleAndClaim schedules a timer due now and claims until it fired.
func scheduleAndClaim(t *testing.T, q *queue.Queue, id string) {
	t.Helper()
	schedule(t, q, id, time.Now())
	deadline := time.Now().Add(10 * time.Second)
	for {
		res, err := q.Engine().Claim(context.Background(), queue.MaxBatch)
		if err != nil {
			t.Fatalf("claim of %s: %v", id, err)
		}
		for _, f := range res.Fired {
			if f.ID == id {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not fire", id)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestScriptsRunAsRedisFunctions: on Redis 7, schedules and claims run
// as Redis functions (FCALL), loading their libraries on first use and
// again after the server lost them (FUNCTION FLUSH, as a restart without
// persistence does), and never as EVAL scripts while the user may call
// functions.
func TestScriptsRunAsRedisFunctions(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t, redistest.Config{})
	rdb := srv.Client(t)
	ctx := context.Background()
	q, err := queue.New(rdb, queue.Options{Namespace: redistest.Namespace(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()

	scheduleAndClaim(t, q, "first")
	libs, err := rdb.FunctionList(ctx, redis.FunctionListQuery{LibraryNamePattern: "timerq_*"}).Result()
	if err != nil {
		t.Fatal(err)
	}
	loaded := map[string]bool{}
	for _, l := range libs {
		loaded[l.Name[:strings.LastIndex(l.Name, "_")]] = true
	}
	for _, want := range []string{"timerq_schedule", "timerq_claim"} {
		if !loaded[want] {
			t.Errorf("no library %s_* loaded; libraries: %v", want, loaded)
		}
	}
	if err := rdb.FunctionFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	scheduleAndClaim(t, q, "after-flush")
	calls := commandCalls(t, rdb)
	if calls["fcall"] < 4 {
		t.Errorf("%d FCALLs for two schedules and their claims, want at least 4 (%v)", calls["fcall"], calls)
	}
	if n := calls["evalsha"] + calls["eval"]; n != 0 {
		t.Errorf("%d EVALSHA or EVAL calls while functions were usable, want 0 (%v)", n, calls)
	}
}

// TestScriptsRunWithoutFunctionRights: a user who may not call or load
// functions runs the same scripts by EVALSHA, from its first call.
func TestScriptsRunWithoutFunctionRights(t *testing.T) {
	t.Parallel()
	for _, missing := range []string{"-fcall", "-function|load"} {
		t.Run(missing, func(t *testing.T) {
			t.Parallel()
			srv := redistest.Start(t, redistest.Config{})
			admin := srv.Client(t)
			ctx := context.Background()
			if err := admin.Do(ctx, "ACL", "SETUSER", "worker", "on", ">pw", "~*", "&*", "+@all", missing).Err(); err != nil {
				t.Fatal(err)
			}
			rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), Username: "worker", Password: "pw"})
			defer rdb.Close()
			q, err := queue.New(rdb, queue.Options{Namespace: redistest.Namespace(t)})
			if err != nil {
				t.Fatal(err)
			}
			defer q.Close()
			scheduleAndClaim(t, q, "one")
			scheduleAndClaim(t, q, "two")
			calls := commandCalls(t, admin)
			if calls["evalsha"] < 4 {
				t.Errorf("%d EVALSHA calls for two schedules and their claims, want at least 4 (%v)", calls["evalsha"], calls)
			}
			// One FCALL, the first, may reach the server: without
			// +function|load it finds no function and cannot load one.
			if calls["fcall"] > 1 {
				t.Errorf("%d FCALLs ran for a user without %s, want at most the first", calls["fcall"], missing)
			}
		})
	}
}

// TestRelativeDueTimesReadEachCallsClock: a relative due time counts from
// the server's clock at its own call. As a Redis function the scripts'
// includes outlive a call, and a clock kept from an earlier call made a
// later RescheduleIn due early, by the time between the calls.
func TestRelativeDueTimesReadEachCallsClock(t *testing.T) {
	t.Parallel()
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		q := newQueue(t, b, queue.Options{Namespace: redistest.Namespace(t)})
		ctx := context.Background()
		schedule(t, q, "a", time.Now().Add(time.Hour))
		schedule(t, q, "b", time.Now().Add(time.Hour))
		first, err := q.RescheduleIn(ctx, "a", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(200 * time.Millisecond)
		second, err := q.RescheduleIn(ctx, "b", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if gap := second.Due.Sub(first.Due); gap < 150*time.Millisecond {
			t.Errorf("two RescheduleIn(1m) 200 ms apart are due %v apart, want about 200 ms: the second counted from an earlier clock", gap)
		}
	})
}
