package poller_test

import (
	"context"
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
		// CatchUpAll: the series must stay unbroken even if a loaded
		// machine stalls the pollers past two occurrences, when the default
		// (CatchUpOnce) would rightly fire only the latest of them.
		info, _, err := q.PutRecurring(context.Background(), queue.Recurring{ID: "beat", Every: 100 * time.Millisecond, CatchUp: queue.CatchUpAll})
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
