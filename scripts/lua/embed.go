// Package lua holds timerq's Redis scripts, one file per script, and embeds
// them so the queue package can load them. Each exported source is the shared
// prelude followed by the script; see each .lua file's header for its KEYS,
// ARGV, reply and complexity.
package lua

import (
	_ "embed"
	"strings"
)

//go:embed prelude.lua
var prelude string

//go:embed schedule.lua
var schedule string

//go:embed claim.lua
var claim string

//go:embed cancel.lua
var cancel string

//go:embed reschedule.lua
var reschedule string

//go:embed purge.lua
var purge string

//go:embed stats.lua
var stats string

//go:embed list.lua
var list string

//go:embed get.lua
var get string

//go:embed check.lua
var check string

//go:embed restore.lua
var restore string

//go:embed requeue.lua
var requeue string

// Heartbeat renews a worker's membership of a namespace (heartbeat.lua). It
// works on the namespace-wide workers key, not a shard, so it has no
// prelude.
//
//go:embed heartbeat.lua
var Heartbeat string

// Workers reads a namespace's live workers and its latest heartbeat
// (workers.lua); like Heartbeat it has no prelude.
//
//go:embed workers.lua
var Workers string

// Script sources, each with the prelude prepended.
var (
	// Schedule creates timers that do not exist yet (schedule.lua).
	Schedule = prelude + schedule
	// Claim fires due timers exactly once (claim.lua).
	Claim = prelude + claim
	// Cancel cancels a scheduled timer (cancel.lua).
	Cancel = prelude + cancel
	// Reschedule moves a scheduled timer (reschedule.lua).
	Reschedule = prelude + reschedule
	// Purge removes settled timers past their retention (purge.lua).
	Purge = prelude + purge
	// Stats reports counts and the overdue backlog (stats.lua).
	Stats = prelude + stats
	// List pages through timers in due order (list.lua).
	List = prelude + list
	// Get reads one timer (get.lua).
	Get = prelude + get
	// Check checks, changing nothing, that the Redis user may run what the
	// other scripts run (check.lua).
	Check = prelude + check
	// Restore writes exported timers with their states and times (restore.lua).
	Restore = prelude + restore
	// Requeue moves a dead letter back onto the fire stream (requeue.lua).
	Requeue = prelude + requeue
)

// Sharded returns a script source that announces wakeups with SPUBLISH
// (sharded pub/sub, Redis 7.0+) instead of PUBLISH. Inside a Cluster
// script, a shard channel is slot-checked like a key, so every channel a
// script publishes to carries the hash tag of the script's keys.
func Sharded(src string) string {
	// Every 'PUBLISH' literal: redis.call('PUBLISH', ...), the prelude's
	// redis.pcall('PUBLISH', ...), and the command name its refusal
	// reports (so the ACL hint says +spublish).
	return strings.ReplaceAll(src, "'PUBLISH'", "'SPUBLISH'")
}
