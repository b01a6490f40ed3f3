//go:build !linux

package poller

import "time"

// sleepUntil sleeps until at, which is at most wakeSlack away. Only Linux
// has the kernel sleep (wake_linux.go); elsewhere this is a runtime timer,
// as precise as the platform makes it.
func sleepUntil(at time.Time) { time.Sleep(time.Until(at)) }
