package queue

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/timerq/timerq/internal/redistest"
)

// A blocking Lease woken by a fire that another consumer of its group took
// already waits on, from the group's last delivered entry, without a lease
// round; a fire not handed out yet, or a group that does not exist yet,
// runs the round (issue 38: every fire woke every dispatcher into one).
func TestWokenLeaseWaitsOnlyForWhatItsGroupTook(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		q, err := New(b.Client, Options{Namespace: redistest.Namespace(t)})
		if err != nil {
			t.Fatal(err)
		}
		defer q.Close()
		l, err := q.layout(ctx)
		if err != nil {
			t.Fatal(err)
		}
		k := l.shardOf("t0")
		fire := func(id string) {
			t.Helper()
			if _, err := q.ScheduleBatch(ctx, []NewTimer{{ID: id, Due: time.Now().Add(-time.Second)}}); err != nil {
				t.Fatal(err)
			}
			if res, err := q.Engine().Claim(ctx, 10); err != nil || len(res.Fired) != 1 {
				t.Fatalf("claim %s: %+v, %v", id, res, err)
			}
		}
		// wake is what awaitFires returns after last: the first new entry.
		wake := func(last []string) []redis.XStream {
			t.Helper()
			args := &redis.XReadArgs{Count: 1, Block: -1}
			for _, sp := range l.spaces {
				args.Streams = append(args.Streams, sp.Fires())
			}
			args.Streams = append(args.Streams, last...)
			st, err := b.Client.XRead(ctx, args).Result()
			if err != nil || len(st) != 1 || len(st[0].Messages) != 1 {
				t.Fatalf("XREAD after %v: %v, %v", last, st, err)
			}
			return st
		}
		fire("t0")
		last := make([]string, len(l.spaces))
		for i := range last {
			last[i] = "0-0"
		}
		woken := wake(last)
		first := woken[0].Messages[0].ID
		if q.takenAlready(ctx, l, "g", last, woken) {
			t.Fatal("no group yet: taken")
		}
		if ds, err := q.Lease(ctx, "g", "other", LeaseOptions{Count: 1}); err != nil || len(ds) != 1 || ds[0].Event.StreamID != first {
			t.Fatalf("Lease = %v, %v", ds, err)
		}
		if !q.takenAlready(ctx, l, "g", last, woken) {
			t.Fatal("another consumer took it: not taken")
		}
		if last[k] != first {
			t.Fatalf("last[%d] = %s, want %s: the group's last delivered entry", k, last[k], first)
		}
		// A fire in the same shard, not handed out yet.
		id := "t1"
		for i := 2; l.shardOf(id) != k; i++ {
			id = fmt.Sprintf("t%d", i)
		}
		fire(id)
		woken = wake(last)
		if q.takenAlready(ctx, l, "g", last, woken) {
			t.Fatal("a fire not handed out yet: taken")
		}
		if last[k] != first {
			t.Fatalf("last[%d] moved to %s: a round must look first", k, last[k])
		}
		// A group that never read: a round creates it.
		zeros := make([]string, len(l.spaces))
		for i := range zeros {
			zeros[i] = "0-0"
		}
		if q.takenAlready(ctx, l, "h", zeros, wake(zeros)) {
			t.Fatal("a group that never read: taken")
		}
	})
}
