package queue_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/queue"
)

// TestWorkersReportsLiveMembersAndLastSeen: Workers lists the members a
// heartbeat keeps alive, and remembers the latest heartbeat after the
// worker leaves or lapses, so an operator can tell "never served" from
// "its worker stopped at 02:14".
func TestWorkersReportsLiveMembersAndLastSeen(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		q, err := queue.New(b.Client, queue.Options{Namespace: redistest.Namespace(t)})
		if err != nil {
			t.Fatal(err)
		}
		defer q.Close()
		ws, err := q.Inspect().Workers(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(ws.Live) != 0 || !ws.LastSeen.IsZero() || ws.Now.IsZero() {
			t.Fatalf("a namespace never served: %+v", ws)
		}

		if _, err := q.Engine().Heartbeat(ctx, "w1", time.Minute, false); err != nil {
			t.Fatal(err)
		}
		if _, err := q.Engine().Heartbeat(ctx, "w2", time.Minute, false); err != nil {
			t.Fatal(err)
		}
		ws, err = q.Inspect().Workers(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(ws.Live) != 2 || ws.Live[0].ID != "w1" || ws.Live[1].ID != "w2" {
			t.Fatalf("live = %+v, want w1 and w2", ws.Live)
		}
		if exp := ws.Live[0].Expires.Sub(ws.Now); exp <= 0 || exp > time.Minute {
			t.Errorf("w1 expires %v from now, want within the 1m ttl", exp)
		}
		if ws.LastWorker != "w2" || ws.LastLeft || ws.LastSeen.After(ws.Now) || ws.Now.Sub(ws.LastSeen) > 10*time.Second {
			t.Errorf("last seen %v by %q (left %v), now %v: want w2 just now", ws.LastSeen, ws.LastWorker, ws.LastLeft, ws.Now)
		}

		// w2 leaves; w1's membership lapses (a crash): none is live, and
		// the last heartbeat is still known.
		if _, err := q.Engine().Heartbeat(ctx, "w1", time.Millisecond, false); err != nil {
			t.Fatal(err)
		}
		if _, err := q.Engine().Heartbeat(ctx, "w2", time.Minute, true); err != nil {
			t.Fatal(err)
		}
		redistest.Eventually(t, 5*time.Second, "w1's membership lapses", func() bool {
			ws, err = q.Inspect().Workers(ctx)
			return err == nil && len(ws.Live) == 0
		})
		if ws.LastSeen.IsZero() || ws.LastWorker != "w2" || !ws.LastLeft {
			t.Errorf("after w2 left: last seen %v by %q (left %v), want w2, left", ws.LastSeen, ws.LastWorker, ws.LastLeft)
		}
	})
}

// TestStatsReportsTheShardsThatAnswer: one failing shard (here its due key
// holds a string; during a slot move it would be TRYAGAIN) leaves Stats and
// DueHistogram with the other shards' figures and a *ShardError naming the
// failed one, rather than no figures at all.
func TestStatsReportsTheShardsThatAnswer(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		b.Shards = 4
		ctx := context.Background()
		q := newQueue(t, b, queue.Options{})
		due := time.Now().Add(time.Hour)
		for k := range 4 {
			if k == 2 {
				continue
			}
			if _, err := q.Schedule(ctx, idInShard(t, q, "t", k), due, nil); err != nil {
				t.Fatal(err)
			}
		}
		if err := b.Client.Set(ctx, q.Keys().Shard(2)[0], "not a zset", 0).Err(); err != nil {
			t.Fatal(err)
		}
		st, err := q.Stats(ctx)
		var se *queue.ShardError
		if !errors.As(err, &se) || len(se.Failed) != 1 || se.Failed[2] == nil {
			t.Fatalf("Stats error = %v, want a *ShardError for shard 2", err)
		}
		if !errors.Is(err, queue.ErrWrongType) || !strings.Contains(err.Error(), "shard 2") {
			t.Errorf("error %q: want ErrWrongType, naming shard 2", err)
		}
		if st.Scheduled != 3 || len(st.Shards) != 4 || st.Shards[0].Scheduled != 1 || st.Shards[2].Scheduled != 0 || st.Now.IsZero() {
			t.Errorf("stats = %+v, want the 3 timers of the shards that answered", st)
		}
		counts, err := q.Inspect().DueHistogram(ctx, st.Now, []time.Duration{time.Minute, 2 * time.Hour})
		if !errors.As(err, &se) || se.Failed[2] == nil || len(se.Failed) != 1 {
			t.Fatalf("DueHistogram error = %v, want a *ShardError for shard 2", err)
		}
		if want := []int64{0, 0, 3, 0}; !slices.Equal(counts, want) {
			t.Errorf("histogram = %v, want %v", counts, want)
		}
	})
}
