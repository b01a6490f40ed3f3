package queue

// SetCancelInCall sets how many selected timers CancelMatching handles in
// the call (CancelInCall), until the returned function restores it.
func SetCancelInCall(n int64) (restore func()) {
	old := cancelInCall
	cancelInCall = n
	return func() { cancelInCall = old }
}

// SetCancelStepHook has every bulk cancel runner call h after each step;
// when h returns false the runner stops at once without releasing its
// lease, as a worker killed there would. The returned function removes h.
func SetCancelStepHook(h func(job string, shard int) bool) (restore func()) {
	cancelStepHook.Store(&h)
	return func() { cancelStepHook.Store(nil) }
}
