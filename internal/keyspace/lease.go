package keyspace

// LeaseCursors is the hash in which Queue.Lease keeps, per consumer group,
// where its scan for expired leases resumes (scripts/lua/lease.lua): group
// -> XAUTOCLAIM cursor, a fire stream entry ID. A group whose last scan
// reached the end has no field. It lives with the shard's fire stream, so
// the scan and its cursor move in one script, whichever stateless caller
// runs it.
func (s Space) LeaseCursors() string { return s.tag + "lease-cursors" }
