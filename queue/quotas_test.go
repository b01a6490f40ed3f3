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

// quotaQueue returns a queue of a new namespace of shards shards (1: the
// default layout) whose quotas are q, set before the queue's first call.
func quotaQueue(t *testing.T, b *redistest.Backend, shards int, q queue.Quotas) *queue.Queue {
	t.Helper()
	ns := redistest.Namespace(t)
	if shards > 1 {
		if _, err := queue.CreateNamespace(context.Background(), b.Client, ns, shards); err != nil {
			t.Fatal(err)
		}
	}
	if err := queue.SetQuotas(context.Background(), b.Client, ns, q); err != nil {
		t.Fatalf("SetQuotas: %v", err)
	}
	return newQueue(t, b, queue.Options{Namespace: ns})
}

func timersNamed(prefix string, n int) []queue.NewTimer {
	out := make([]queue.NewTimer, n)
	for i := range out {
		out[i] = queue.NewTimer{ID: fmt.Sprintf("%s-%d", prefix, i), Due: time.Now().Add(time.Hour), Payload: []byte("p")}
	}
	return out
}

// wantQuota fails unless err is a *QuotaError of the quota with the
// numbers given.
func wantQuota(t *testing.T, what string, err error, quota string, limit, usage, adding int64) {
	t.Helper()
	var qe *queue.QuotaError
	if !errors.Is(err, queue.ErrQuotaExceeded) || !errors.As(err, &qe) {
		t.Fatalf("%s: err = %v, want a quota error", what, err)
	}
	if errors.Is(err, queue.ErrOutcomeUnknown) {
		t.Fatalf("%s: err = %v; a quota refusal wrote nothing, its outcome is known", what, err)
	}
	if qe.Quota != quota || qe.Limit != limit || qe.Usage != usage || qe.Adding != adding {
		t.Fatalf("%s: %+v, want quota %s limit %d usage %d adding %d", what, *qe, quota, limit, usage, adding)
	}
}

func TestQuotasDefault(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		q := newQueue(t, b, queue.Options{})
		got, err := q.Inspect().Quotas(ctx)
		if err != nil || got != queue.DefaultQuotas {
			t.Fatalf("Quotas of a namespace without any = %+v, %v; want the defaults %+v", got, err, queue.DefaultQuotas)
		}
		if queue.DefaultQuotas.Pending == 0 || queue.DefaultQuotas.Endpoints == 0 || queue.DefaultQuotas.Schedules == 0 {
			t.Fatalf("DefaultQuotas %+v: every quota is on by default", queue.DefaultQuotas)
		}
		set := queue.Quotas{Pending: 7, Endpoints: 0, Schedules: 3}
		if err := queue.SetQuotas(ctx, b.Client, q.Namespace(), set); err != nil {
			t.Fatal(err)
		}
		if got, err := queue.NamespaceQuotas(ctx, b.Client, q.Namespace()); err != nil || got != set {
			t.Fatalf("NamespaceQuotas = %+v, %v; want %+v", got, err, set)
		}
		if err := queue.SetQuotas(ctx, b.Client, q.Namespace(), queue.Quotas{Pending: -1}); !errors.Is(err, queue.ErrInvalidOptions) {
			t.Fatalf("SetQuotas(-1) = %v, want ErrInvalidOptions", err)
		}
	})
}

func TestQuotaPendingRefusesWithNothingWritten(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		q := quotaQueue(t, b, 1, queue.Quotas{Pending: 5})
		if _, err := q.ScheduleBatch(ctx, timersNamed("a", 3)); err != nil {
			t.Fatal(err)
		}
		before := snapshot(t, b.Client, q)

		// A batch that crosses the quota is refused whole.
		_, err := q.ScheduleBatch(ctx, timersNamed("b", 3))
		wantQuota(t, "batch of 3 over 3 of 5", err, queue.QuotaPending, 5, 3, 3)
		_, err = q.Restore(ctx, []queue.Timer{
			{ID: "r1", State: queue.StateScheduled, Due: time.Now().Add(time.Hour), CreatedAt: time.Now()},
			{ID: "r2", State: queue.StateScheduled, Due: time.Now().Add(time.Hour), CreatedAt: time.Now()},
			{ID: "r3", State: queue.StateScheduled, Due: time.Now().Add(time.Hour), CreatedAt: time.Now()},
		})
		wantQuota(t, "restore of 3 over 3 of 5", err, queue.QuotaPending, 5, 3, 3)
		if after := snapshot(t, b.Client, q); after != before {
			t.Fatalf("a refused call wrote:\nbefore %s\nafter  %s", before, after)
		}

		// Up to the quota is allowed; an existing ID adds nothing.
		if _, err := q.ScheduleBatch(ctx, append(timersNamed("a", 3), timersNamed("c", 2)...)); err != nil {
			t.Fatalf("a batch that fits: %v", err)
		}
		if res, err := q.Schedule(ctx, "a-0", time.Now().Add(time.Hour), nil); err != nil || res.Created {
			t.Fatalf("an existing ID at the quota = %+v, %v; want it returned, not refused", res, err)
		}
		full := snapshot(t, b.Client, q)
		_, err = q.Schedule(ctx, "d", time.Now().Add(time.Hour), nil)
		wantQuota(t, "one over a full namespace", err, queue.QuotaPending, 5, 5, 1)
		_, err = q.Debounce(ctx, "k", queue.DebounceOptions{Delay: time.Minute, MaxWait: time.Hour})
		wantQuota(t, "a new debounce window", err, queue.QuotaPending, 5, 5, 1)
		if after := snapshot(t, b.Client, q); after != full {
			t.Fatalf("a refused call wrote:\nbefore %s\nafter  %s", full, after)
		}
		st, err := q.Stats(ctx)
		if err != nil || st.Scheduled != 5 {
			t.Fatalf("Stats = %+v, %v; want 5 scheduled", st, err)
		}
		u, err := q.Inspect().Usage(ctx)
		if err != nil || u.Pending != 5 || u.Quotas.Pending != 5 || u.MaxShardPending != 5 {
			t.Fatalf("Usage = %+v, %v; want 5 pending of 5", u, err)
		}
		mustBeConsistent(t, b.Client, q, "quota refusals")
	})
}

// In a sharded namespace each shard's script sees its own due set only: the
// pending quota is checked per shard, ceil(quota/shards) each.
func TestQuotaPendingSharded(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		q := quotaQueue(t, b, 4, queue.Quotas{Pending: 10}) // 3 a shard
		// IDs of shard 0 alone, as the keyspace routes them.
		var shard0 []queue.NewTimer
		for i := 0; len(shard0) < 4; i++ {
			id := fmt.Sprintf("s-%d", i)
			if keyspace.ShardOf(id, 4) == 0 {
				shard0 = append(shard0, queue.NewTimer{ID: id, Due: time.Now().Add(time.Hour)})
			}
		}
		if _, err := q.ScheduleBatch(ctx, shard0[:3]); err != nil {
			t.Fatal(err)
		}
		_, err := q.ScheduleBatch(ctx, shard0[3:])
		wantQuota(t, "the fourth timer of a shard", err, queue.QuotaPending, 10, 3, 1)
		var qe *queue.QuotaError
		if errors.As(err, &qe); qe.ShardLimit != 3 || qe.Shards != 4 {
			t.Fatalf("QuotaError %+v, want ShardLimit 3 of 4 shards", *qe)
		}
		// Other shards still take timers.
		var other []queue.NewTimer
		for i := 0; len(other) < 3; i++ {
			id := fmt.Sprintf("o-%d", i)
			if keyspace.ShardOf(id, 4) != 0 {
				other = append(other, queue.NewTimer{ID: id, Due: time.Now().Add(time.Hour)})
			}
		}
		if _, err := q.ScheduleBatch(ctx, other); err != nil {
			t.Fatalf("other shards: %v", err)
		}
		u, err := q.Inspect().Usage(ctx)
		if err != nil || u.Pending != 6 || u.MaxShardPending != 3 {
			t.Fatalf("Usage = %+v, %v; want 6 pending, 3 in the fullest shard", u, err)
		}
	})
}

func TestQuotaEndpointsAndSchedules(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		for _, shards := range []int{1, 4} {
			t.Run(fmt.Sprint(shards), func(t *testing.T) {
				ctx := context.Background()
				q := quotaQueue(t, b, shards, queue.Quotas{Endpoints: 2, Schedules: 4})
				ep := billing()
				for _, name := range []string{"e1", "e2"} {
					ep.Name = name
					if _, err := q.Endpoints().Put(ctx, ep, nil); err != nil {
						t.Fatal(err)
					}
				}
				ep.Name = "e3"
				_, err := q.Endpoints().Put(ctx, ep, nil)
				wantQuota(t, "a third endpoint", err, queue.QuotaEndpoints, 2, 2, 1)
				if _, err := q.Endpoints().Get(ctx, "e3"); !errors.Is(err, queue.ErrEndpointNotFound) {
					t.Fatalf("the refused endpoint: Get = %v, want not found", err)
				}
				ep.Name, ep.URL = "e1", "https://billing.example.com/other"
				if created, err := q.Endpoints().Put(ctx, ep, nil); err != nil || created {
					t.Fatalf("replacing an endpoint at the quota = %v, %v; want replaced", created, err)
				}

				// Schedules: 4 in all, so with 4 shards one in each.
				put := func(id string) error {
					_, _, err := q.Recurring().Put(ctx, queue.Recurring{ID: id, Spec: "@every 1h"})
					return err
				}
				var ids []string
				for i := 0; len(ids) < 2; i++ {
					if id := fmt.Sprintf("r-%d", i); keyspace.ScheduleShard(id, shards) == 0 {
						ids = append(ids, id)
					}
				}
				limit, held := int64(4), int64(4)
				if shards == 1 {
					for _, id := range []string{"x1", "x2", "x3"} {
						if err := put(id); err != nil {
							t.Fatal(err)
						}
					}
				} else {
					held = 1
				}
				if err := put(ids[0]); err != nil {
					t.Fatal(err)
				}
				err = put(ids[1])
				wantQuota(t, "a schedule past the quota", err, queue.QuotaSchedules, limit, held, 1)
				if _, err := q.Recurring().Get(ctx, ids[1]); err == nil {
					t.Fatalf("the refused schedule %s exists", ids[1])
				}
				if err := put(ids[0]); err != nil {
					t.Fatalf("putting an existing schedule at the quota: %v", err)
				}
				u, err := q.Inspect().Usage(ctx)
				if err != nil || u.Endpoints != 2 || u.Schedules != held || u.MaxShardSchedules != held {
					t.Fatalf("Usage = %+v, %v", u, err)
				}
			})
		}
	})
}
