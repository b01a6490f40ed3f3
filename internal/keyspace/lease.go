package keyspace

// LeaseCursors is the hash in which Queue.Lease keeps, per consumer group,
// the state of its scan for expired leases (scripts/lua/lease.lua):
// "<group>#quiet" -> the server time in milliseconds before which the scan
// is skipped. A field named after a group alone is the XAUTOCLAIM cursor of
// earlier versions, no longer read. It lives with the shard's fire stream,
// so the scan and its state move in one script, whichever stateless caller
// runs it.
func (s Space) LeaseCursors() string { return s.tag + "lease-cursors" }
