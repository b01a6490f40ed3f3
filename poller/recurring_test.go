package poller_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/poller"
	"github.com/timerq/timerq/queue"
)

// Two pollers keep a 100 ms schedule firing: an unbroken series of
// occurrences, each once, none early, with no scheduler process.
func TestPollersFireRecurringOccurrencesOnce(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		ns := redistest.Namespace(t)
		q := newQueue(t, b.Client, ns)
		var mu sync.Mutex
		fired := map[string]int{}
		var early []queue.Fired
		hooks := poller.Hooks{Claimed: func(res queue.ClaimResult) {
			mu.Lock()
			defer mu.Unlock()
			for _, f := range res.Fired {
				fired[f.ID]++
				if f.FiredAt.Before(f.Due) {
					early = append(early, f)
				}
			}
		}}
		for range 2 {
			p, err := poller.New(q, poller.Options{Hooks: hooks, Logger: (&logBuf{}).logger()})
			if err != nil {
				t.Fatal(err)
			}
			start(t, p)
		}
		// CatchUpAll with a high limit: the series must stay unbroken even
		// if a loaded machine delays arming past several occurrences, which
		// the default (CatchUpOnce, or a limit of 10 = 1 s here) would
		// rightly leave out.
		info, _, err := q.Recurring().Put(context.Background(), queue.Recurring{ID: "beat", Every: 100 * time.Millisecond, CatchUp: queue.CatchUpAll, CatchUpLimit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, 10*time.Second, "eight occurrences to fire", func() bool {
			mu.Lock()
			defer mu.Unlock()
			for k := 1; k <= 8; k++ {
				if fired[queue.OccurrenceID("beat", info.Anchor.Add(time.Duration(k)*100*time.Millisecond))] == 0 {
					return false
				}
			}
			return true
		})
		mu.Lock()
		defer mu.Unlock()
		if len(early) > 0 {
			t.Fatalf("fired early: %+v", early)
		}
		n := 0
		for k := 1; ; k++ {
			c := fired[queue.OccurrenceID("beat", info.Anchor.Add(time.Duration(k)*100*time.Millisecond))]
			if c == 0 {
				break
			}
			if c != 1 {
				t.Fatalf("occurrence %d fired %d times", k, c)
			}
			n++
		}
		if n != len(fired) || n < 8 {
			t.Fatalf("%d occurrences fired in an unbroken series, %d in all (%v); want at least 8 and no gap", n, len(fired), fired)
		}
	})
}

// A poller stopped just as a claim fires an occurrence still arms the next
// one before Run returns: a clean stop leaves every schedule armed, where
// only a crash needs the repair pass. The arm loop used to end with Run's
// context and could miss what the last claim handed it.
func TestStopArmsWhatTheLastClaimFired(t *testing.T) {
	m, rdb := redistest.Mini(t)
	for i := range 10 {
		q := newQueue(t, rdb, fmt.Sprint(redistest.Namespace(t), i))
		ctx, cancel := context.WithCancel(context.Background())
		var once sync.Once
		p, err := poller.New(q, poller.Options{
			Maintenance: poller.MaintenanceOptions{Disabled: true}, Logger: (&logBuf{}).logger(),
			Hooks: poller.Hooks{Claimed: func(res queue.ClaimResult) {
				if len(res.Fired) == 0 {
					return
				}
				once.Do(func() {
					cancel()
					// Let Run's other goroutines see the stop before this
					// claim's reply is handled, as when a reply is slow.
					time.Sleep(20 * time.Millisecond)
				})
			}},
		})
		if err != nil {
			t.Fatal(err)
		}
		// One occurrence armed (Ahead 1), due in 300 ms; the next an hour on.
		// The server clock stands still from the put until Run, then moves
		// to the occurrence: a machine slow between reading the clock and
		// the put cannot push the first occurrence an hour out.
		now := time.Now().Truncate(time.Millisecond)
		m.SetTime(now)
		info, _, err := q.Recurring().Put(context.Background(), queue.Recurring{ID: "s", Every: time.Hour, Ahead: 1, Anchor: now.Add(-time.Hour + 300*time.Millisecond)})
		if err != nil {
			t.Fatal(err)
		}
		if len(info.Pending) != 1 || !info.Pending[0].Due.Equal(now.Add(300*time.Millisecond)) {
			t.Fatalf("pending %v, want one occurrence due at %v", info.Pending, now.Add(300*time.Millisecond))
		}
		m.SetTime(info.Pending[0].Due)
		if err := p.Run(ctx); err != nil {
			t.Fatal(err)
		}
		info, err = q.Recurring().Get(context.Background(), "s")
		if err != nil {
			t.Fatal(err)
		}
		if len(info.Pending) != 1 {
			t.Fatalf("stop %d: pending %v after Run returned; want the next occurrence armed", i, info.Pending)
		}
	}
}
