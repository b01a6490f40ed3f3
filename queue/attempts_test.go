package queue_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/timerq/timerq/internal/keyspace"
	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/queue"
)

// AckAttempt and Release with Log append to the timer's attempt log, which
// keeps the last AttemptLogLen entries, reads back field for field, and
// expires with the namespace's retention.
func TestDeliveryAttemptLog(t *testing.T) {
	t.Parallel() // its own namespace on each backend; see docs/development.md, "Loops"
	redistest.ForEachAll(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		q := newQueue(t, b, queue.Options{Retention: time.Hour})
		if _, err := q.Schedule(ctx, "t/1", time.Now().Add(-time.Second), []byte("x")); err != nil {
			t.Fatal(err)
		}
		if res, err := q.Engine().Claim(ctx, 10); err != nil || len(res.Fired) != 1 {
			t.Fatalf("claim: %+v %v", res, err)
		}
		o := queue.LeaseOptions{Lease: time.Minute, MaxAttempts: 100}
		due := time.UnixMilli(time.Now().UnixMilli())
		for i := 1; i <= queue.AttemptLogLen+2; i++ {
			var ds []queue.Delivery
			redistest.Eventually(t, 10*time.Second, "the released fire comes back", func() bool {
				var err error
				ds, err = q.Lease(ctx, "g", "c", o)
				if err != nil {
					t.Fatal(err)
				}
				return len(ds) == 1
			})
			a := queue.DeliveryAttempt{TimerID: "t/1", Attempt: i, Due: due, At: due.Add(time.Duration(i) * time.Second),
				Latency: 1500 * time.Microsecond, Status: 500, Outcome: "retry", Reason: "server_error", Error: fmt.Sprint("boom ", i)}
			if i <= queue.AttemptLogLen+1 {
				if _, err := q.Release(ctx, "g", ds[0].DeliveryID, queue.ReleaseOptions{Log: &a}, o); err != nil {
					t.Fatal(err)
				}
				continue
			}
			a.Status, a.Outcome, a.Reason, a.Error = 204, "delivered", "", ""
			if acked, err := q.Deliveries().AckAttempt(ctx, "g", ds[0].DeliveryID, a); err != nil || !acked {
				t.Fatalf("AckAttempt: %v %v", acked, err)
			}
		}
		log, err := q.Deliveries().Attempts(ctx, "t/1")
		if err != nil {
			t.Fatal(err)
		}
		if len(log) != queue.AttemptLogLen {
			t.Fatalf("%d entries, want the last %d", len(log), queue.AttemptLogLen)
		}
		first, last := log[0], log[len(log)-1]
		if first.Attempt != 3 || last.Attempt != queue.AttemptLogLen+2 || last.Outcome != "delivered" || last.Status != 204 {
			t.Errorf("log from %+v to %+v: want attempts 3..%d ending delivered", first, last, queue.AttemptLogLen+2)
		}
		if !first.Due.Equal(due) || !first.At.Equal(due.Add(3*time.Second)) || first.Latency != 1500*time.Microsecond ||
			first.Error != "boom 3" || first.Reason != "server_error" || first.TimerID != "t/1" {
			t.Errorf("first entry %+v does not read back as written", first)
		}
		if got, ok, err := q.Deliveries().LastAttempt(ctx, "t/1"); err != nil || !ok || got.Attempt != last.Attempt {
			t.Errorf("LastDeliveryAttempt: %+v %v %v", got, ok, err)
		}
		if _, ok, err := q.Deliveries().LastAttempt(ctx, "never"); ok || err != nil {
			t.Errorf("a timer without attempts: %v %v", ok, err)
		}
		key := keyspace.Shard(q.Namespace(), keyspace.ShardOf("t/1", max(b.Shards, 1)), max(b.Shards, 1)).Attempts("t/1")
		if ttl := b.Client.PTTL(ctx, key).Val(); ttl <= 0 || ttl > time.Hour {
			t.Errorf("%s expires in %v, want the retention (1h)", key, ttl)
		}
	})
}

// AckAttempts settles many deliveries in one call: each is acknowledged
// and its attempt logged as AckAttempt would, a delivery acknowledged
// already reports false, and a bad delivery ID fails alone.
func TestAckAttemptsBatch(t *testing.T) {
	redistest.ForEachAll(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		q := newQueue(t, b, queue.Options{})
		fireN(t, q, "b", 5)
		ds := lease(t, q, "g", "c", queue.LeaseOptions{Lease: time.Minute, Count: 100}) // every shard visited: the group made in each
		if len(ds) != 5 {
			t.Fatalf("leased %d, want 5", len(ds))
		}
		if _, err := q.Ack(ctx, "g", ds[4].DeliveryID); err != nil {
			t.Fatal(err)
		}
		var acks []queue.AttemptAck
		for i, d := range ds {
			acks = append(acks, queue.AttemptAck{DeliveryID: d.DeliveryID, Attempt: queue.DeliveryAttempt{TimerID: d.Event.ID, Attempt: 1,
				Due: d.Event.Due, StreamID: d.Event.StreamID, At: time.UnixMilli(int64(1000 * (i + 1))), Status: 204, Outcome: "delivered"}})
		}
		acks = append(acks, queue.AttemptAck{DeliveryID: "garbled", Attempt: queue.DeliveryAttempt{TimerID: "b0"}})
		acked, errs := q.Deliveries().AckAttempts(ctx, "g", acks)
		if fmt.Sprint(acked) != "[true true true true false false]" {
			t.Errorf("acked %v, want the four pending ones", acked)
		}
		for i, err := range errs {
			if bad := i == len(acks)-1; bad != (err != nil) || (bad && !errors.Is(err, queue.ErrInvalidDeliveryID)) {
				t.Errorf("errs[%d] = %v", i, err)
			}
		}
		if n := pendingIn(t, b, q, "g"); n != 0 {
			t.Errorf("%d pending after AckAttempts, want 0", n)
		}
		for i, d := range ds {
			log, err := q.Deliveries().Attempts(ctx, d.Event.ID)
			if err != nil || len(log) != 1 || log[0].Outcome != "delivered" || log[0].StreamID != d.Event.StreamID ||
				!log[0].At.Equal(time.UnixMilli(int64(1000*(i+1)))) {
				t.Errorf("attempt log of %s: %+v, %v; want its one delivered attempt", d.Event.ID, log, err)
			}
		}
		if _, errs := q.Deliveries().AckAttempts(ctx, "bad group!", acks[:1]); !errors.Is(errs[0], queue.ErrInvalidOptions) {
			t.Errorf("a bad group: %v", errs[0])
		}
	})
}
