package redistest

import (
	"testing"
	"time"
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
