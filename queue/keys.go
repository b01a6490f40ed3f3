package queue

// Keys names the Redis keys and pub/sub channels of a queue's namespace,
// for operators and tools that read them directly (XRANGE of a stream,
// SUBSCRIBE to a channel, an ACL line). Every method takes a shard number,
// 0 to the namespace's shard count − 1; an unsharded namespace has only
// shard 0. Before the queue has read the namespace's layout from Redis, it
// assumes Options.Shards (1 if 0). The names are those of
// docs/redis-layout.md, built by the one package that knows them.
type Keys struct{ q *Queue }

// Keys returns the names of the namespace's keys and channels.
func (q *Queue) Keys() Keys { return Keys{q} }

// Shard returns shard k's keys in the order the scripts take them: due,
// timers, fired, cancelled, expire, fires, counters. A shard of layout 2
// keeps its scheduled and settled timers in one set, the sched set, which
// stands in all four set positions (docs/redis-layout.md); the queue
// knows a shard's layout from its first call, and from the first script
// on the shard after an upgrade.
func (ks Keys) Shard(k int) []string { return ks.q.known().space(k).Keys() }

// Recurring returns the two keys that hold shard k's recurring schedules:
// the schedules hash and the sched-due sorted set. Their occurrences are
// ordinary timers in the keys Shard returns.
func (ks Keys) Recurring(k int) []string {
	s := ks.q.known().spaces[k]
	return []string{s.Schedules(), s.SchedDue()}
}

// Stream returns shard k's fire stream, to which every claim appends one
// entry per fired timer with fields id, due, fired and payload.
func (ks Keys) Stream(k int) string { return ks.q.known().spaces[k].Fires() }

// DeadLetter returns shard k's dead-letter stream, where Consume and
// Release move fires that failed too often. Each entry has the fire event's
// fields (id, due, fired, payload) plus error, attempts, group, consumer and
// stream_id (the fire stream entry's ID). Operators read it with XRANGE;
// Deliveries.Requeue puts an entry back.
func (ks Keys) DeadLetter(k int) string { return ks.q.known().spaces[k].DeadLetter() }

// Wake returns shard k's pub/sub channel on which Schedule and Reschedule
// announce a due time earlier than any pending one of the shard (the
// message is that due time in Unix milliseconds), so that sleeping pollers
// wake early.
func (ks Keys) Wake(k int) string { return ks.q.known().spaces[k].Wake() }

// Timer returns the pub/sub channel on which timer id's firing ("fired")
// or cancellation ("cancelled") is announced. It carries the hash tag of
// the timer's shard.
func (ks Keys) Timer(id string) string {
	l := ks.q.known()
	return l.spaces[l.shardOf(id)].TimerChannel(id)
}
