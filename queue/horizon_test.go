package queue_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/queue"
)

// horizonSpread are due offsets spread over a week and beyond, from the
// server's clock, with the cumulative counts DueHorizonBounds must report
// for three timers at each: overdue, 1m, 1h, 1d, 1w.
var (
	horizonSpread = []time.Duration{-time.Hour, -time.Second, 40 * time.Second, 40 * time.Minute,
		13 * time.Hour, 4 * 24 * time.Hour, 10 * 24 * time.Hour}
	horizonWant = []int64{6, 9, 12, 15, 18}
)

// scheduleSpread schedules three timers at each of horizonSpread from now.
func scheduleSpread(t *testing.T, q *queue.Queue, now time.Time) {
	t.Helper()
	var batch []queue.NewTimer
	for i, off := range horizonSpread {
		for j := range 3 {
			batch = append(batch, queue.NewTimer{ID: fmt.Sprintf("h%d-%d", i, j), Due: now.Add(off)})
		}
	}
	if _, err := q.ScheduleBatch(context.Background(), batch); err != nil {
		t.Fatal(err)
	}
}

// TestDueHorizon: the cumulative counts of timers spread over a week, by
// the server's clock, summed over the shards, with Within 0 counting what
// Stats calls overdue.
func TestDueHorizon(t *testing.T) {
	redistest.ForEachAll(t, func(t *testing.T, b *redistest.Backend) {
		shards := []int{b.Shards}
		if b.Cluster == nil {
			shards = []int{0, 8} // unsharded, and sharded on one server
		}
		for _, n := range shards {
			t.Run(fmt.Sprintf("shards=%d", n), func(t *testing.T) {
				ctx := context.Background()
				bb := *b
				bb.Shards = n
				q := newQueue(t, &bb, queue.Options{})
				now := serverNow(t, b)
				if b.Mini != nil {
					// Three days ahead of the client's clock: a count by
					// the client's would find nothing overdue.
					now = time.Now().Add(72 * time.Hour).Truncate(time.Millisecond)
					b.Mini.SetTime(now)
				}
				scheduleSpread(t, q, now)
				h, err := q.Inspect().DueHorizon(ctx, queue.DueHorizonBounds)
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(h.Due, horizonWant) {
					t.Errorf("Due = %v, want %v (within %v)", h.Due, horizonWant, h.Within)
				}
				// Now is to the millisecond; the read may fall in the same
				// millisecond as now.
				if d := h.Now.Sub(now.Truncate(time.Millisecond)); d < 0 || d > time.Minute {
					t.Errorf("Now = %v, want the server's clock, about %v", h.Now, now)
				}
				st, err := q.Stats(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if h.Due[0] != st.Overdue {
					t.Errorf("overdue %d, Stats.Overdue %d", h.Due[0], st.Overdue)
				}
				want := max(n, 1)
				if len(h.Shards) != want {
					t.Fatalf("%d shards' counts, want %d", len(h.Shards), want)
				}
				sum, nonEmpty := make([]int64, len(h.Due)), 0
				for _, s := range h.Shards {
					for i, c := range s.Due {
						sum[i] += c
					}
					if s.Due[len(s.Due)-1] > 0 {
						nonEmpty++
					}
				}
				if !slices.Equal(sum, h.Due) {
					t.Errorf("shards sum to %v, total %v", sum, h.Due)
				}
				if want > 1 && nonEmpty < 2 {
					t.Errorf("%d of %d shards hold timers: the test shows no sum", nonEmpty, want)
				}
			})
		}
	})
}

// TestDueHorizonBoundaries: a timer due exactly at now+w counts within w
// ("at or before"), one a millisecond later does not; miniredis only, whose
// clock stands still.
func TestDueHorizonBoundaries(t *testing.T) {
	m, rdb := redistest.Mini(t)
	q, err := queue.New(rdb, queue.Options{Namespace: redistest.Namespace(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	now := time.Now().Truncate(time.Millisecond)
	m.SetTime(now)
	ctx := context.Background()
	if _, err := q.ScheduleBatch(ctx, []queue.NewTimer{{ID: "at-now", Due: now}, {ID: "at-1m", Due: now.Add(time.Minute)},
		{ID: "past-1m", Due: now.Add(time.Minute + time.Millisecond)}}); err != nil {
		t.Fatal(err)
	}
	h, err := q.Inspect().DueHorizon(ctx, []time.Duration{0, time.Minute, time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if want := []int64{1, 2, 3}; !slices.Equal(h.Due, want) {
		t.Errorf("Due = %v, want %v", h.Due, want)
	}
	// The clock moves, the counts follow it.
	m.SetTime(now.Add(time.Minute))
	if h, err = q.Inspect().DueHorizon(ctx, []time.Duration{0}); err != nil {
		t.Fatal(err)
	}
	if h.Due[0] != 2 {
		t.Errorf("overdue a minute later = %d, want 2", h.Due[0])
	}
}

func TestDueHorizonRefusesBadOffsets(t *testing.T) {
	_, rdb := redistest.Mini(t)
	q, err := queue.New(rdb, queue.Options{Namespace: redistest.Namespace(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	for _, within := range [][]time.Duration{nil, {-time.Second}, {time.Hour, time.Minute}, {time.Minute, time.Minute},
		{time.Microsecond}, make([]time.Duration, 17)} {
		if _, err := q.Inspect().DueHorizon(context.Background(), within); !errors.Is(err, queue.ErrInvalidOptions) {
			t.Errorf("DueHorizon(%v) = %v, want ErrInvalidOptions", within, err)
		}
	}
}

func TestHorizonName(t *testing.T) {
	for d, want := range map[time.Duration]string{0: "overdue", time.Minute: "1m", time.Hour: "1h", 24 * time.Hour: "1d",
		7 * 24 * time.Hour: "1w", 36 * time.Hour: "36h", 90 * time.Second: "90s", 1500 * time.Millisecond: "1500ms", 14 * 24 * time.Hour: "2w"} {
		if got := queue.HorizonName(d); got != want {
			t.Errorf("HorizonName(%v) = %q, want %q", d, got, want)
		}
	}
}
