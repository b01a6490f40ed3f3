package redistest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// PollEvery is how often Eventually re-checks its condition.
const PollEvery = 5 * time.Millisecond

// Eventually re-checks cond every PollEvery until it holds, and fails the
// test (t.Fatalf) if it still does not after d. Use it to wait for an
// event that has no channel or hook to await (a state in Redis, a counter
// fed by a hook): polling a condition with a deadline returns as soon as
// the event happened, where a fixed sleep guesses how long it takes and is
// either slow or flaky. cond runs on the calling goroutine.
func Eventually(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	if cond() {
		return
	}
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	tick := time.NewTicker(PollEvery)
	defer tick.Stop()
	for {
		select {
		case <-deadline.C:
			if cond() {
				return
			}
			t.Fatalf("timed out after %v waiting for %s", d, what)
		case <-tick.C:
			if cond() {
				return
			}
		}
	}
}

// AwaitServerTime returns once the clock of the Redis server behind c (its
// TIME) has reached at, to the millisecond, so that a timer due at at is
// claimable. A test that schedules a timer due "now" and claims at once
// races the clock: a claim compares due times with TIME, so a claim
// before the timer's due time finds nothing (the product's "never
// early"); waiting to the millisecond covers the microseconds below it. It fails the
// test if the server's clock has not got there within 5 s of when the
// local clock gets there, as on a miniredis whose clock a test froze with
// SetTime.
func AwaitServerTime(t testing.TB, c redis.UniversalClient, at time.Time) {
	t.Helper()
	want := at.Add(time.Millisecond - time.Nanosecond).Truncate(time.Millisecond)
	Eventually(t, max(time.Until(want), 0)+5*time.Second, fmt.Sprintf("the server clock to reach %s", want.UTC().Format(time.RFC3339Nano)), func() bool {
		now, err := c.Time(context.Background()).Result()
		if err != nil {
			t.Fatalf("TIME: %v", err)
		}
		return !now.Truncate(time.Millisecond).Before(want)
	})
}
