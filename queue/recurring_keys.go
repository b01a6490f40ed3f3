package queue

// recurringKeys returns the keys every recurring-schedule script takes: the
// namespace's timer keys (Keys), then the schedules hash and the sched-due set
// (scripts/lua/recur_prelude.lua). It is the one place that names the
// schedule keys, so that the sharded layout can move them into
// internal/keyspace in one step; they carry the namespace's hash tag, so a
// schedule and its occurrences live in one Cluster slot.
func (q *Queue) recurringKeys() []string {
	prefix := "timerq:{" + q.opts.Namespace + "}:"
	return append(q.Keys(), prefix+"schedules", prefix+"sched-due")
}

// RecurringKeys returns the two keys that hold the namespace's recurring
// schedules: the schedules hash and the sched-due sorted set. Occurrences
// are ordinary timers in the keys Keys returns.
func (q *Queue) RecurringKeys() []string {
	k := q.recurringKeys()
	return k[len(k)-2:]
}
