package poller_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/poller"
	"github.com/timerq/timerq/queue"
)

// TestUnreachableIsNotASlotMigration: a claim that cannot connect is
// reported through Hooks.Unavailable with reason "unreachable" (and
// counted in timerq_shard_unavailable_total), never through Paused, which
// means a slot migration; CLUSTERDOWN has its own reason.
func TestUnreachableIsNotASlotMigration(t *testing.T) {
	m0, rdb := redistest.Mini(t)
	t.Cleanup(func() {
		rdb.Close()
		redistest.AwaitRedials(t) // of the closed miniredis
	})
	q := newQueue(t, rdb, "unreachable")
	m := poller.NewMetrics()
	hooks := m.Hooks()
	var mu sync.Mutex
	var reasons []string
	paused := 0
	p, err := poller.New(q, poller.Options{
		BackoffMin: 10 * time.Millisecond, BackoffMax: 20 * time.Millisecond,
		Maintenance: poller.MaintenanceOptions{Disabled: true},
		Hooks: poller.Hooks{
			Unavailable: func(shard int, err error) {
				hooks.Unavailable(shard, err)
				mu.Lock()
				reasons = append(reasons, poller.UnavailableReason(err))
				mu.Unlock()
			},
			Paused: func(int, error) { mu.Lock(); paused++; mu.Unlock() },
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	stop := start(t, p)
	waitFor(t, 10*time.Second, "a claim", func() bool { return !p.LastClaim().IsZero() })
	m0.Close() // nothing listens there now: every dial is refused
	waitFor(t, 10*time.Second, "two unavailable claims", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(reasons) >= 2
	})
	stop()
	mu.Lock()
	defer mu.Unlock()
	for _, r := range reasons {
		if r != "unreachable" {
			t.Errorf("reason %q, want unreachable", r)
		}
	}
	if paused != 0 {
		t.Errorf("%d claims reported as slot-migration pauses", paused)
	}
	if got := testutil.ToFloat64(m.ShardUnavailable.WithLabelValues("unreachable")); got < 2 {
		t.Errorf("timerq_shard_unavailable_total{reason=unreachable} = %v, want >= 2", got)
	}
	if r := poller.UnavailableReason(fmt.Errorf("x: %w", queue.ErrClusterDown)); r != "cluster_down" {
		t.Errorf("reason of ErrClusterDown = %q", r)
	}
	if r := poller.UnavailableReason(fmt.Errorf("x: %w", queue.ErrSlotMigrating)); r != "" {
		t.Errorf("reason of ErrSlotMigrating = %q, want none", r)
	}
}
