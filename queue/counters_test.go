package queue_test

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/timerq/timerq/internal/keyspace"
	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/queue"
	"github.com/timerq/timerq/scripts/lua"
)

// TestCountersMatchFires: the counters claim.lua keeps agree with what the
// claims returned, timer by timer, bucket by bucket.
func TestCountersMatchFires(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		q := newQueue(t, b, queue.Options{})
		now := serverNow(t, b)
		lates := []time.Duration{0, 3 * time.Millisecond, 40 * time.Millisecond, 2 * time.Second, 7 * time.Minute, time.Hour}
		for i, late := range lates {
			for j := range 3 {
				schedule(t, q, fmt.Sprint("t-", i, "-", j), now.Add(-late))
			}
		}
		schedule(t, q, "later", now.Add(time.Hour))
		var fired []queue.Fired
		for len(fired) < 3*len(lates) {
			res, err := q.Engine().Claim(ctx, 5) // several claims, each adding its own
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Fired) == 0 {
				t.Fatalf("fired %d of %d", len(fired), 3*len(lates))
			}
			fired = append(fired, res.Fired...)
		}
		got, err := q.Inspect().Counters(ctx)
		if err != nil {
			t.Fatal(err)
		}
		want := queue.Counters{Fired: int64(len(fired)), Lateness: make([]int64, len(queue.LatenessBuckets))}
		for _, f := range fired {
			want.LatenessSum += f.Lateness()
			for i, bound := range queue.LatenessBuckets {
				if f.Lateness() <= bound {
					want.Lateness[i]++
				}
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("Counters = %+v\nwant       %+v", got, want)
		}
		if want.Lateness[len(want.Lateness)-1] == want.Fired {
			t.Fatal("no timer beyond the last bucket: the test misses the overflow")
		}
	})
}

// TestLatenessBucketsMatchScripts: the Go bounds are those every script
// that counts lateness (includes late_field, scripts/lua/includes) counts
// by, bound for bound and field for field.
func TestLatenessBucketsMatchScripts(t *testing.T) {
	var want []string
	for _, b := range queue.LatenessBuckets {
		want = append(want, fmt.Sprint(b.Milliseconds()))
	}
	bound := regexp.MustCompile(`late <= (\d+) then return 'late_le_(\d+)'`)
	counting := 0
	for _, s := range lua.All {
		if !strings.Contains(s.Source, "local function late_field(") {
			continue
		}
		counting++
		var got []string
		for _, m := range bound.FindAllStringSubmatch(s.Source, -1) {
			if m[1] != m[2] {
				t.Errorf("%s: late_field counts a lateness <= %s in late_le_%s", s.Name, m[1], m[2])
			}
			got = append(got, m[1])
		}
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("%s: late_field bounds = %s, queue.LatenessBuckets = %s", s.Name, strings.Join(got, ","), strings.Join(want, ","))
		}
	}
	// claim and commit write the counters.
	if counting < 2 {
		t.Errorf("%d scripts include late_field, want claim and commit at least", counting)
	}
}

// TestCorruptCounterFieldNeitherStopsNorHalvesAClaim: a counters field
// that HINCRBY refuses (only a hand-written HSET makes one) is reset by the
// claim that next adds to it, in the same script, instead of failing that
// claim after its other writes: the timers fire once, with their stream
// entries, and every counter counts them.
func TestCorruptCounterFieldNeitherStopsNorHalvesAClaim(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		q := newQueue(t, b, queue.Options{})
		now := serverNow(t, b)
		schedule(t, q, "a", now.Add(-time.Second))
		schedule(t, q, "b", now.Add(-time.Second))
		sp := keyspace.Shard(q.Namespace(), 0, 1)
		// fired holds an integer; late_sum_ms and every bucket hold what
		// HINCRBY refuses.
		corrupt := []any{"fired", "7", "late_sum_ms", "not a number", "late_le_inf", "1x"}
		for _, bound := range queue.LatenessBuckets {
			corrupt = append(corrupt, fmt.Sprint("late_le_", bound.Milliseconds()), "1x")
		}
		if err := b.Client.HSet(ctx, sp.Counters(), corrupt...).Err(); err != nil {
			t.Fatal(err)
		}
		res, err := q.Engine().Claim(ctx, 10)
		if err != nil {
			t.Fatalf("Claim with a corrupt counters field: %v", err)
		}
		if len(res.Fired) != 2 {
			t.Fatalf("fired %d timers, want 2", len(res.Fired))
		}
		for _, id := range []string{"a", "b"} {
			tm, err := q.Get(ctx, id)
			if err != nil || tm.State != queue.StateFired {
				t.Fatalf("Get(%s) = %+v, %v; want fired", id, tm, err)
			}
		}
		if n, err := b.Client.XLen(ctx, sp.Fires()).Result(); err != nil || n != 2 {
			t.Fatalf("fire stream holds %d entries (%v), want 2", n, err)
		}
		got, err := b.Client.HGetAll(ctx, sp.Counters()).Result()
		if err != nil {
			t.Fatal(err)
		}
		// fired was an integer, so it is added to; late_sum_ms and the
		// buckets were not, so the ones this claim adds to restart from it.
		want := map[string]string{"fired": "9", "late_sum_ms": "0", "late_le_inf": "1x"}
		for _, bound := range queue.LatenessBuckets {
			want[fmt.Sprint("late_le_", bound.Milliseconds())] = "1x"
		}
		var late, buckets = int64(0), map[string]int{}
		for _, f := range res.Fired {
			late += f.Lateness().Milliseconds()
			field := "late_le_inf"
			for _, bound := range queue.LatenessBuckets {
				if f.Lateness() <= bound {
					field = fmt.Sprint("late_le_", bound.Milliseconds())
					break
				}
			}
			buckets[field]++
		}
		want["late_sum_ms"] = fmt.Sprint(late)
		for field, n := range buckets {
			want[field] = fmt.Sprint(n)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("counters = %v\nwant       %v", got, want)
		}
	})
}
