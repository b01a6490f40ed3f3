package keyspace

// Overlap is the hash in which a consumer group's overlap policy is kept
// (scripts/lua/overlap.lua): schedule ID -> fire stream entry ID of the
// occurrence of that schedule last handed to the group. It lives with the
// shard's fire stream, whose entries it points into, so one script checks
// and sets it together with the group's pending entries.
func (s Space) Overlap(group string) string { return s.tag + "overlap:" + group }
