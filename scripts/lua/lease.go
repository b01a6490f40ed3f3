package lua

import _ "embed"

//go:embed lease.lua
var lease string

//go:embed release.lua
var release string

// Scripts of pull consumption (queue.Lease), each with the prelude
// prepended. They take one shard's seven keys and its dead-letter stream;
// Lease also its lease-cursors hash. Neither publishes, so they have no
// Sharded variant.
var (
	// Lease reclaims expired leases, dead-letters what exceeded its
	// attempts and reads new entries, for one consumer of a group
	// (lease.lua).
	Lease = prelude + lease
	// Release hands a leased delivery back, dead-letters it or extends its
	// lease (release.lua).
	Release = prelude + release
)
