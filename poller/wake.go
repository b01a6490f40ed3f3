package poller

import "time"

// wakeSlack is how much earlier than asked a wakeTimer sets its Go timer:
// the most the runtime rounds a sleep up by.
const wakeSlack = time.Millisecond

// kernelSleeps bounds the wakeTimers of the process that sleep in the
// kernel at once: each holds an OS thread while it does, and a worker may
// run a claim loop for each of hundreds of shards. Past the bound a loop
// waits out its last millisecond on a Go timer, as precise as before
// wakeTimer.
var kernelSleeps = make(chan struct{}, 64)

// wakeTimer is the claim loop's timer: a time.Timer that ends within about
// a tenth of a millisecond of the time it was set for, so that the owner
// of a shard claims at a timer's due time rather than up to a millisecond
// after it.
//
// A Go timer wakes a program that is parked in the network poller, whose
// wait (epoll_wait on Linux) is given in whole milliseconds, so the
// runtime rounds a short sleep up to the next one. On the 2-core test
// machine a 0.1 ms timer fired about 1.1 ms after it was set, and a 1.4 ms
// one about 2.2 ms after (BENCHMARKS.md, "Wake: the claim loop's sleep").
// wakeTimer sets its Go timer wakeSlack early, and the loop ends the wait
// with finish, which sleeps the rest in the kernel (nanosleep wakes about
// 0.1 ms late). The loop is blocked for at most wakeSlack in finish, just
// before a claim it would make anyway.
type wakeTimer struct {
	C     <-chan time.Time
	timer *time.Timer
	at    time.Time // when the current wait ends; zero when stopped
}

// newWakeTimer returns a wakeTimer that fires at once, as time.NewTimer(0).
func newWakeTimer() *wakeTimer {
	t := time.NewTimer(0)
	return &wakeTimer{C: t.C, timer: t, at: time.Now()}
}

// Reset sets the timer to fire d from now, as time.Timer.Reset (whose
// channel needs no draining since Go 1.23).
func (t *wakeTimer) Reset(d time.Duration) {
	t.at = time.Now().Add(d)
	t.timer.Reset(max(d-wakeSlack, 0))
}

// Stop stops the timer, as time.Timer.Stop.
func (t *wakeTimer) Stop() {
	t.at = time.Time{}
	t.timer.Stop()
}

// finish waits out the rest of the time the timer was set for, once its
// channel has delivered.
func (t *wakeTimer) finish() {
	if t.at.IsZero() || !time.Now().Before(t.at) {
		return
	}
	select {
	case kernelSleeps <- struct{}{}:
		sleepUntil(t.at)
		<-kernelSleeps
	default:
		time.Sleep(time.Until(t.at))
	}
}
