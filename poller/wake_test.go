package poller

import (
	"testing"
	"time"
)

// A wakeTimer sets its Go timer early and finishes the wait itself, so
// the one thing it must never do is end before the time it was set for:
// the claim loop's sleep to a due time would then claim before it (an
// empty claim, as the script compares with TIME, but a wasted one).
//
// It holds too when every kernel sleep is taken (kernelSleeps), and the
// timer finishes on a Go timer instead.
func TestWakeTimerNeverEndsEarly(t *testing.T) {
	for _, full := range []bool{false, true} {
		if full {
			for range cap(kernelSleeps) {
				kernelSleeps <- struct{}{}
			}
		}
		timer := newWakeTimer()
		<-timer.C // newWakeTimer fires at once, as time.NewTimer(0)
		timer.finish()
		for _, d := range []time.Duration{0, 150 * time.Microsecond, 900 * time.Microsecond,
			wakeSlack, 1500 * time.Microsecond, 3 * time.Millisecond} {
			for range 5 {
				start := time.Now()
				timer.Reset(d)
				<-timer.C
				timer.finish()
				if got := time.Since(start); got < d {
					t.Fatalf("Reset(%v), kernel sleeps all taken: %v: the wait ended after %v, before its time", d, full, got)
				}
			}
		}
	}
	for range cap(kernelSleeps) {
		<-kernelSleeps
	}
}

// Stop and a later Reset behave as time.Timer's: nothing is delivered
// after Stop, and a stopped timer's finish does not sleep.
func TestWakeTimerStop(t *testing.T) {
	timer := newWakeTimer()
	<-timer.C
	timer.Reset(500 * time.Millisecond)
	timer.Stop()
	select {
	case <-timer.C:
		t.Fatal("a stopped wakeTimer delivered")
	case <-time.After(20 * time.Millisecond):
	}
	start := time.Now()
	timer.finish()
	if d := time.Since(start); d > 250*time.Millisecond {
		t.Fatalf("finish on a stopped timer slept %v, toward the deadline Stop dropped", d)
	}
	timer.Reset(time.Millisecond)
	<-timer.C
}
