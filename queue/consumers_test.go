package queue_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/queue"
)

// TestConsumers: a group's consumers are listed over every shard, the one
// that got an entry last with the shorter Idle, with their pending
// deliveries; Inactive is known exactly where the server
// reports it (Redis 7.2+, miniredis). An unknown group has none.
func TestConsumers(t *testing.T) {
	t.Parallel() // its own namespace on each backend; see docs/development.md, "Loops"
	forEachLayout(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		q := newQueue(t, b, queue.Options{})
		if cs, err := q.Inspect().Consumers(ctx, "g"); err != nil || len(cs) != 0 {
			t.Fatalf("Consumers without a stream = %v, %v; want none", cs, err)
		}
		o := queue.ConsumeOptions{Block: 20 * time.Millisecond}
		ok := func(context.Context, queue.Event) error { return nil }
		// Redis lists a consumer once it got an entry; fire one to each.
		fired := 0
		fire := func(prefix string) {
			t.Helper()
			fired++
			if _, err := q.Schedule(ctx, idInShard(t, q, fmt.Sprint(prefix, fired, "-"), max(b.Shards, 1)-1), time.Now().Add(-time.Second), nil); err != nil {
				t.Fatal(err)
			}
			claimAll(t, q)
		}
		consumers := func() []queue.ConsumerInfo {
			t.Helper()
			cs, err := q.Inspect().Consumers(ctx, "g")
			if err != nil {
				t.Fatal(err)
			}
			return cs
		}
		var goneHandled atomic.Bool
		stopGone := consumeAsync(t, q, "g", "gone", func(context.Context, queue.Event) error {
			goneHandled.Store(true)
			return nil
		}, o)
		fire("for-gone-")
		// Stopped only once it handled the entry and acknowledged it: a
		// server may list a consumer before it leased anything (a reclaim
		// that found nothing creates it), and a stop that lands during a
		// Lease can lose its reply and leave the entry pending to gone (seen
		// on Valkey 8 under load).
		waitUntil(t, 5*time.Second, "consumer gone to get and acknowledge an entry", func() bool {
			cs := consumers()
			return goneHandled.Load() && len(cs) == 1 && cs[0].Pending == 0
		})
		stopGone()
		consumeAsync(t, q, "g", "live", ok, o)
		var cs []queue.ConsumerInfo
		waitUntil(t, 10*time.Second, "gone idle for 500ms, live less so, and live to acknowledge its entry", func() bool {
			if cs = consumers(); len(cs) < 2 {
				fire("for-live-")
				return false
			}
			// Listed once it leased the entry, acknowledged only after its
			// handler: wait for the Ack too, as for gone above (Consume
			// runs Lease, the handler and Ack, so on miniredis the lister
			// often lands between them). A lost Ack still times out.
			if cs[1].Pending != 0 {
				return false
			}
			// miniredis does not track idle; real Redis decides.
			return b.Mini != nil || cs[0].Idle >= 500*time.Millisecond && cs[1].Idle < cs[0].Idle
		})
		gone, live := cs[0], cs[1]
		if live.Name != "live" || live.Pending != 0 || gone.Pending != 0 {
			t.Errorf("Consumers = %+v", cs)
		}
		want := b.Mini != nil || serverAtLeast72(t, b)
		if live.InactiveKnown != want || gone.InactiveKnown != want {
			t.Errorf("InactiveKnown = %v, %v; want %v on %s", live.InactiveKnown, gone.InactiveKnown, want, b.Name)
		}
		if !want && (live.Inactive != 0 || gone.Inactive != 0) {
			t.Errorf("Inactive without a report = %v, %v; want 0", live.Inactive, gone.Inactive)
		}
		if cs, err := q.Inspect().Consumers(ctx, "nobody"); err != nil || len(cs) != 0 {
			t.Errorf("Consumers of an unknown group = %v, %v; want none", cs, err)
		}
	})
}

// serverAtLeast72 reports whether b is Redis 7.2 or later, which reports
// a consumer's "inactive".
func serverAtLeast72(t *testing.T, b *redistest.Backend) bool {
	info, err := b.Client.Info(context.Background(), "server").Result()
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "redis_version:"); ok {
			var major, minor int
			for i, part := range strings.SplitN(v, ".", 3)[:2] {
				n := 0
				for _, c := range part {
					n = n*10 + int(c-'0')
				}
				if i == 0 {
					major = n
				} else {
					minor = n
				}
			}
			return major > 7 || major == 7 && minor >= 2
		}
	}
	t.Fatalf("no redis_version in INFO server:\n%s", info)
	return false
}
