package dispatch

import "time"

// SetBusyWait sets how long d waits for its endpoints' room before it
// leases a fire anyway (busyPause in production). Call it before Run.
func SetBusyWait(d *Dispatcher, w time.Duration) { d.busyWait = w }
