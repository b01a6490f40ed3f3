package poller_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/poller"
	"github.com/timerq/timerq/queue"
)

// A worker started before `timerctl namespace create --shards 16` follows
// the creation without a restart: it claims all 16 shards, and timers a
// fresh client schedules into them fire. Before, it kept the one-shard
// layout it read at start, and 15 shards' timers never fired.
func TestPollerFollowsNamespaceCreatedLater(t *testing.T) {
	t.Parallel() // servers of its own; see docs/development.md, "Loops"
	redistest.ForEachAll(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		ns := redistest.Namespace(t)
		for _, mode := range []struct {
			name string
			opts poller.Options
		}{
			{"membership", poller.Options{Heartbeat: 50 * time.Millisecond, MemberTTL: time.Hour}},
			// No membership, so no heartbeat to read the meta key with.
			{"every-poller", poller.Options{Heartbeat: 50 * time.Millisecond, MemberTTL: time.Hour,
				Takeover: poller.TakeoverOptions{Disabled: true}}},
		} {
			t.Run(mode.name, func(t *testing.T) {
				ns := ns + "-" + mode.name[:1]
				worker := newQueue(t, b.Client, ns)
				opts := mode.opts
				opts.WorkerID = "w1"
				opts.MaxPollInterval = 50 * time.Millisecond
				opts.Maintenance.Disabled = true
				p, err := poller.New(worker, opts)
				if err != nil {
					t.Fatal(err)
				}
				start(t, p)
				waitFor(t, 5*time.Second, "the poller to claim the one shard", func() bool {
					return len(p.OwnedShards()) == 1
				})
				if _, err := queue.CreateNamespace(ctx, b.Client, ns, 16); err != nil {
					t.Fatal(err)
				}
				created := time.Now()
				waitFor(t, 5*time.Second, "the poller to claim the 16 shards", func() bool {
					return len(p.OwnedShards()) == 16
				})
				t.Logf("claiming 16 shards %v after the creation", time.Since(created).Round(time.Millisecond))
				fresh := newQueue(t, b.Client, ns)
				const n = 64
				var batch []queue.NewTimer
				for i := range n {
					batch = append(batch, queue.NewTimer{ID: fmt.Sprint("t-", i), Due: time.Now()})
				}
				if _, err := fresh.ScheduleBatch(ctx, batch); err != nil {
					t.Fatal(err)
				}
				shards := map[int]bool{}
				for _, nt := range batch {
					k, _ := fresh.Inspect().ShardOf(ctx, nt.ID)
					shards[k] = true
				}
				if len(shards) < 8 {
					t.Fatalf("the timers landed on %d shards; want most of 16", len(shards))
				}
				waitFor(t, 5*time.Second, "every timer to fire", func() bool {
					st, err := fresh.Stats(ctx)
					return err == nil && st.Fired == n
				})
			})
		}
	})
}

// A replicas setting made after the worker and the application started
// takes effect without a restart: with no replica to acknowledge, the
// worker's claims and the application's schedules are refused with
// ErrNotReplicated. Before, both kept the setting they read at start.
func TestPollerFollowsReplicasSetLater(t *testing.T) {
	t.Parallel() // a server of its own; see docs/development.md, "Loops"
	srv := redistest.Start(t, redistest.Config{})
	rdb := srv.Client(t)
	ctx := context.Background()
	ns := redistest.Namespace(t)
	if _, err := queue.CreateNamespace(ctx, rdb, ns, 1); err != nil {
		t.Fatal(err)
	}
	worker, err := queue.New(rdb, queue.Options{Namespace: ns, ReplicaTimeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer worker.Close()
	app, err := queue.New(rdb, queue.Options{Namespace: ns, ReplicaTimeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close()
	// Due 2 s after the setting: the worker must follow it by then, and
	// refuse to fire it without a replica.
	if _, err := app.Schedule(ctx, "later", time.Now().Add(2*time.Second), nil); err != nil {
		t.Fatal(err)
	}
	var refused atomic.Bool
	p, err := poller.New(worker, poller.Options{
		WorkerID: "w1", Heartbeat: 50 * time.Millisecond, MemberTTL: time.Hour,
		MaxPollInterval: 50 * time.Millisecond, BackoffMax: 100 * time.Millisecond,
		Maintenance: poller.MaintenanceOptions{Disabled: true},
		Hooks: poller.Hooks{ClaimFailed: func(err error) {
			if errors.Is(err, queue.ErrNotReplicated) {
				refused.Store(true)
			}
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	start(t, p)
	waitFor(t, 5*time.Second, "a claim", func() bool { return !p.LastClaim().IsZero() })
	if err := queue.SetReplicas(ctx, rdb, ns, 1, &queue.ReplicasOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "the application's schedules to wait for a replica", func() bool {
		_, err := app.Schedule(ctx, "after", time.Now().Add(time.Hour), nil)
		return errors.Is(err, queue.ErrNotReplicated)
	})
	waitFor(t, 5*time.Second, "the worker's claims to wait for a replica", refused.Load)
	if st, err := app.Stats(ctx); err != nil || st.Fired != 0 {
		t.Fatalf("fired %d (%v) without a replica; want none", st.Fired, err)
	}
}
