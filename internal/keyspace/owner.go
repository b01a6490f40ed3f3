package keyspace

// Owners, labels, fencing epochs and fire deadlines live beside a shard's
// records, only for the timers that have them, so that a timer without
// them costs no byte and no command more.

// TimerMeta is the hash of the shard's timers that carry an owner, labels
// or a fire deadline: id -> "<epoch>\x1f<deadline ms>\x1f<owner>" followed
// by "\x1f<key>=<value>" per label (queue's timerMeta.stored). schedule.lua and
// restore.lua write it, claim.lua copies the value into the timer's fire
// stream entry (field "meta"), and purge.lua drops it with the record.
func (s Space) TimerMeta() string { return s.tag + "tmeta" }

// Owners indexes the shard's owned timers by owner: a sorted set whose
// members, all at score 0, are "<owner>\x00<id>", so that one owner's
// timers are one ZRANGEBYLEX. It keeps a timer from schedule to purge.
func (s Space) Owners() string { return s.tag + "owners" }

// Epochs is the hash of the owners' fencing epochs on this shard: owner ->
// epoch (absent = 0). A timer records its owner's epoch when it is
// scheduled; queue.Queue.BumpEpoch raises it on every shard.
func (s Space) Epochs() string { return s.tag + "epochs" }
