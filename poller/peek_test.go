package poller

import (
	"context"
	"testing"
	"time"

	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/queue"
)

// TestPeekReadsDueTimesOnly: on a shard of layout 2 the settled timers sort
// after the due times, in the same set. A watcher's peek must find nothing
// pending there, not a "due time" in the fired band (2^50 ms and up, which
// overflows the wait computed from it), and the due time once one exists.
func TestPeekReadsDueTimesOnly(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		q, err := queue.New(b.Client, queue.Options{Namespace: redistest.Namespace(t)})
		if err != nil {
			t.Fatal(err)
		}
		defer q.Close()
		if _, err := q.Schedule(ctx, "done", time.Now().Add(-time.Second), nil); err != nil {
			t.Fatal(err)
		}
		if _, err := q.Engine().UpgradeLayout(ctx, queue.MaxBatch); err != nil {
			t.Fatal(err)
		}
		if res, err := q.Engine().Claim(ctx, 10); err != nil || len(res.Fired) != 1 {
			t.Fatalf("claim: %+v %v", res, err)
		}
		p, err := New(q, Options{})
		if err != nil {
			t.Fatal(err)
		}
		l := &shardLoop{p: p, shard: 0}
		if head, ok, err := l.peek(ctx); err != nil || ok {
			t.Fatalf("peek of a shard holding only a fired timer: head %d µs, ok %v, %v; want nothing pending", head, ok, err)
		}
		due := time.Now().Add(time.Hour).Truncate(time.Millisecond)
		if _, err := q.Schedule(ctx, "next", due, nil); err != nil {
			t.Fatal(err)
		}
		if head, ok, err := l.peek(ctx); err != nil || !ok || head != due.UnixMicro() {
			t.Fatalf("peek: head %d µs, ok %v, %v; want %d", head, ok, err, due.UnixMicro())
		}
	})
}
