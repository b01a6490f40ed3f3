package poller_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/poller"
	"github.com/timerq/timerq/queue"
)

// TestPollerQuarantinesAndLogsOnce: a record written by hand, due before a
// valid timer, no longer stops the shard. The poller fires the valid
// timer, logs the quarantined record once however often it claims after,
// and timerq_namespace_records_quarantined_total counts it.
func TestPollerQuarantinesAndLogsOnce(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		q := newQueue(t, b.Client, redistest.Namespace(t))
		k := q.Keys().Shard(0)
		past := time.Now().Add(-time.Minute)
		if err := b.Client.HSet(ctx, k[1], "poison", "not a record").Err(); err != nil {
			t.Fatal(err)
		}
		if err := b.Client.ZAdd(ctx, k[0], redis.Z{Score: float64(past.UnixMilli()), Member: "poison"}).Err(); err != nil {
			t.Fatal(err)
		}
		if _, err := q.Schedule(ctx, "valid", past.Add(time.Millisecond), nil); err != nil {
			t.Fatal(err)
		}
		var logs logBuf
		claims := make(chan struct{}, 100)
		p, err := poller.New(q, poller.Options{
			Logger: logs.logger(), MaxPollInterval: 10 * time.Millisecond,
			Maintenance: poller.MaintenanceOptions{Disabled: true},
			Hooks: poller.Hooks{Claimed: func(queue.ClaimResult) {
				select {
				case claims <- struct{}{}:
				default:
				}
			}},
		})
		if err != nil {
			t.Fatal(err)
		}
		start(t, p)
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if err := q.Wait(wctx, "valid"); err != nil {
			t.Fatalf("the valid timer behind the malformed record did not fire: %v", err)
		}
		// Several claims after the one that quarantined it.
		for range 5 {
			select {
			case <-claims:
			case <-time.After(10 * time.Second):
				t.Fatal("the poller stopped claiming")
			}
		}
		if n := logs.count("quarantined a record"); n != 1 {
			t.Fatalf("%d quarantine log lines, want 1:\n%s", n, logs.text())
		}
		if n := logs.count("claim failed"); n != 0 {
			t.Fatalf("%d failed claims:\n%s", n, logs.text())
		}
		if got := namespaceCounter(t, q, "timerq_namespace_records_quarantined_total"); got != 1 {
			t.Fatalf("timerq_namespace_records_quarantined_total = %v, want 1", got)
		}
	})
}

func (l *logBuf) text() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
