package queue_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/queue"
)

// TestLeaseRefusesForeignTypes: lease.lua checks a key's type where its
// command meets it, not with a TYPE on every call, and still refuses a
// foreign type before its first write, naming the key: the fire stream
// (every call), the lease cursors hash (a call with deliveries pending,
// which may write it) and the dead-letter stream (a call that
// dead-letters): the delivery it would have reclaimed stays untouched.
func TestLeaseRefusesForeignTypes(t *testing.T) {
	redistest.ForEachAll(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		freezeMini(b)
		foreign := func(key string) {
			t.Helper()
			if err := b.Client.Del(ctx, key).Err(); err != nil {
				t.Fatal(err)
			}
			if err := b.Client.Set(ctx, key, "foreign", 0).Err(); err != nil {
				t.Fatal(err)
			}
		}
		refused := func(err error, key string) {
			t.Helper()
			if !errors.Is(err, queue.ErrWrongType) || !strings.Contains(err.Error(), key) {
				t.Fatalf("Lease over a foreign %s = %v, want ErrWrongType naming it", key, err)
			}
		}

		q := newQueue(t, b, queue.Options{})
		lease(t, q, "other", "c", queue.LeaseOptions{}) // reads the layout, which Keys names
		foreign(q.Keys().Stream(0))
		_, err := q.Lease(ctx, "g", "c", queue.LeaseOptions{})
		refused(err, q.Keys().Stream(0))

		keys := map[string]func(q *queue.Queue) string{
			"cursors": func(q *queue.Queue) string { return queue.LeaseCursors(q, 0) },
			"dead":    func(q *queue.Queue) string { return q.Keys().DeadLetter(0) },
		}
		for name, key := range keys {
			q := newQueue(t, b, queue.Options{})
			if _, err := q.Schedule(ctx, idInShard(t, q, name, 0), time.Now().Add(-time.Second), nil); err != nil {
				t.Fatal(err)
			}
			if got := claimAll(t, q); len(got) != 1 {
				t.Fatalf("claimed %d, want 1", len(got))
			}
			o := queue.LeaseOptions{Lease: 100 * time.Millisecond, MaxAttempts: 1}
			ds := lease(t, q, "g", "c", o)
			if len(ds) != 1 {
				t.Fatalf("leased %d, want 1", len(ds))
			}
			foreign(key(q))
			passLease(t, b, ds[0].LeaseExpires.Add(time.Millisecond))
			_, err := q.Lease(ctx, "g", "c2", o) // would dead-letter it
			refused(err, key(q))
			p, err := b.Client.XPendingExt(ctx, &redis.XPendingExtArgs{Stream: q.Keys().Stream(0), Group: "g", Start: "-", End: "+", Count: 10}).Result()
			if err != nil || len(p) != 1 || p[0].Consumer != "c" || p[0].RetryCount != 1 {
				t.Fatalf("%s: after the refused Lease, pending %+v, %v; want the delivery untouched (c, delivered once)", name, p, err)
			}
		}
	})
}
