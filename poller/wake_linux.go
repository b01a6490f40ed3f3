package poller

import (
	"syscall"
	"time"
)

// sleepUntil sleeps in the kernel until at, which is at most wakeSlack
// away: nanosleep, not a runtime timer, which would round the sleep up to
// a whole millisecond (wakeTimer).
func sleepUntil(at time.Time) {
	for {
		d := time.Until(at)
		if d <= 0 {
			return
		}
		ts := syscall.NsecToTimespec(d.Nanoseconds())
		// EINTR (a signal) ends the sleep early: the loop sleeps the rest.
		_ = syscall.Nanosleep(&ts, nil)
	}
}
