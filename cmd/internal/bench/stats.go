package bench

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"

	"github.com/redis/go-redis/v9"
)

// timerID returns the i-th timer ID of a run: 36 characters shaped like a
// UUID, as timerq.DeriveID makes them, so memory figures match real IDs.
func timerID(run uint32, i int) string {
	return fmt.Sprintf("%08x-0000-4000-8000-%012x", run, i)
}

// payload16 is the 16-byte payload of every bench timer.
var payload16 = []byte("0123456789abcdef")

// fireCheck is what the fire stream says about a set of expected timers.
type fireCheck struct {
	Checks
	// lateness of each expected timer's first fire, fired - due, server
	// ms, sorted.
	lateness []int64
	lastFire int64 // largest fired among expected, server ms
	fired    map[string]int64
}

// runIDs is the set of the first n timer IDs of a run.
func runIDs(run uint32, n int) map[string]bool {
	ids := make(map[string]bool, n)
	for i := range n {
		ids[timerID(run, i)] = true
	}
	return ids
}

// checkFires reads the whole fire stream and compares it with the expected
// IDs: every expected timer must appear exactly once, never before its due.
func checkFires(ctx context.Context, rdb redis.Cmdable, stream string, expected map[string]bool) (*fireCheck, error) {
	fc := &fireCheck{fired: make(map[string]int64, len(expected)), lastFire: math.MinInt64}
	err := eachFire(ctx, rdb, stream, func(_ string, ev fireEvent) {
		switch _, seen := fc.fired[ev.id]; {
		case !expected[ev.id]:
		case seen:
			fc.Duplicates++
		default:
			if ev.fired < ev.due {
				fc.FiredEarly++
			}
			fc.fired[ev.id] = ev.fired
			fc.lateness = append(fc.lateness, ev.fired-ev.due)
			fc.lastFire = max(fc.lastFire, ev.fired)
		}
	})
	fc.Lost = int64(len(expected) - len(fc.fired))
	slices.Sort(fc.lateness)
	return fc, err
}

// fireEvent is one fire stream entry.
type fireEvent struct {
	id, payload string
	due, fired  int64
}

// eachFire calls f with each entry of the fire stream and its entry ID, in
// order, reading 10,000 entries a call.
func eachFire(ctx context.Context, rdb redis.Cmdable, stream string, f func(sid string, ev fireEvent)) error {
	for start := "-"; ; {
		msgs, err := rdb.XRangeN(ctx, stream, start, "+", 10000).Result()
		if err != nil {
			return fmt.Errorf("bench: XRANGE %s: %w", stream, err)
		}
		for _, m := range msgs {
			ev, err := parseFire(m)
			if err != nil {
				return err
			}
			f(m.ID, ev)
		}
		if len(msgs) < 10000 {
			return nil
		}
		start = "(" + msgs[len(msgs)-1].ID
	}
}

func parseFire(m redis.XMessage) (fireEvent, error) {
	id, _ := m.Values["id"].(string)
	payload, _ := m.Values["payload"].(string)
	due, err1 := strconv.ParseInt(fmt.Sprint(m.Values["due"]), 10, 64)
	fired, err2 := strconv.ParseInt(fmt.Sprint(m.Values["fired"]), 10, 64)
	if id == "" || err1 != nil || err2 != nil {
		return fireEvent{}, fmt.Errorf("bench: fire stream entry %s is malformed: %v", m.ID, m.Values)
	}
	return fireEvent{id: id, payload: payload, due: due, fired: fired}, nil
}

// pct returns the q-quantile (0..1) of sorted s by the nearest-rank method.
func pct[T int64 | float64](s []T, q float64) T {
	if len(s) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return s[max(0, min(i, len(s)-1))]
}

// perOpUs is cpu seconds spread over n operations, in microseconds each,
// rounded to 0.1; 0 when n is 0. A timed phase counts only the operations
// done by its end, so on a loaded machine it can end with none done though
// CPU was spent, and cpu/0 is +Inf, which JSON cannot encode.
func perOpUs(cpu float64, n int) float64 {
	if n <= 0 {
		return 0
	}
	return round1(cpu * 1e6 / float64(n))
}

func round1(f float64) float64 { return math.Round(f*10) / 10 }

func round3(f float64) float64 { return math.Round(f*1000) / 1000 }
