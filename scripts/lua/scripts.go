package lua

import (
	"strings"

	"github.com/timerq/timerq/internal/keyspace"
)

// Script is one entry of the table of timerq's Redis scripts.
type Script struct {
	// Name is the script's file, without ".lua".
	Name string
	// Source is the script as loaded: its Includes, with the includes
	// they declare, each once (assemble), then the script's file.
	Source string
	// ShardedSource is Source with SPUBLISH for PUBLISH (Sharded); the same
	// as Source for a script that does not publish.
	ShardedSource string
	// Keys returns the keys the script takes, in its order, for shard sp
	// of a namespace; group is the consumer group the script acts for
	// (overlap) or the debounce key (debounce, debounce_restore), "" for the others. A script of the whole namespace takes
	// sp.Namespace()'s keys, in the slot {NS}.
	Keys func(sp keyspace.Space, group string) []string
	// Publishes means the script announces through pub/sub: it has a
	// sharded flavour (ShardedSource), and a Redis user needs PUBLISH (or
	// SPUBLISH) and the namespace's channels to run it.
	Publishes bool
	// Commands are the commands the script runs, in lower case, each of
	// which an ACL may refuse: a user needs +<command> for each (and
	// EVALSHA, EVAL, the namespace's keys and, if it publishes, PUBLISH or
	// SPUBLISH and its channels). The script names the one refused.
	Commands []string
	// Worker means a worker (package poller) runs the script, so
	// queue.CheckPermissions must find each of its Commands granted.
	Worker bool
	// Includes are the helpers the script calls, each a file
	// includes/<name>.lua; the includes those use come with them. Redis
	// runs a script's whole text on every call, so a script includes
	// what it calls and nothing else (TestScriptsIncludeWhatTheyUse).
	Includes []string
	// Function is the name of the Redis function that runs the script
	// (FCALL, Redis 7.0+), and Library the function library that defines
	// it (FUNCTION LOAD): the same includes and file as Source, with the
	// includes defined once, when the library loads, rather than on every
	// call. Both names carry the library's SHA-1, so that binaries of
	// different versions, and the two pub/sub flavours, each call their
	// own. ShardedFunction and ShardedLibrary are the SPUBLISH flavour.
	Function, Library, ShardedFunction, ShardedLibrary string
	// Early are the includes that the script's early part uses: the text
	// above its line IncludesHere, which runs after the Early includes and
	// before the others are defined. A script whose common call needs few
	// helpers answers it there: defining a function costs Redis about 700
	// instructions on every call, and claim.lua's 35 about as much as a
	// command (BENCHMARKS.md, "Where a claim's instructions go"). Empty for
	// a script without the line.
	Early []string
	// L2 is the script assembled for a shard of layout 2: its includes
	// and file with the include layout's LAYOUT = 2 (includes/layout.lua),
	// under functions and libraries of its own. nil for a script that
	// does not include layout: it runs alike on both layouts.
	L2 *Script
}

// layoutLine is the line of includes/layout.lua that the layout-2 build of
// a script replaces.
const layoutLine = "local LAYOUT = 1\n"

// Layouts returns the builds of s: s itself, and s.L2 when it has one.
func (s *Script) Layouts() []*Script {
	if s.L2 == nil {
		return []*Script{s}
	}
	return []*Script{s, s.L2}
}

// At returns the build of s for a shard of layout layout.
func (s *Script) At(layout int) *Script {
	if layout == 2 && s.L2 != nil {
		return s.L2
	}
	return s
}

// IncludesHere is the line of a script file below which its Includes are
// defined, when it has an early part (Script.Early).
const IncludesHere = "-- (the includes are defined here)\n"

// All is the table: every script timerq runs, in the order of the entries
// below. To add a script, write its .lua file (with the header the others
// have) and one entry naming its Includes; the tests run every entry as Redis users lacking
// each of its rights (internal/aclright).
var All []*Script

func add(s *Script) *Script {
	done := map[string]bool{}
	early := assemble(s.Early, done)
	head, body, split := strings.Cut(file(s.Name), IncludesHere)
	if !split {
		head, body = "", head
	}
	includes := assemble(s.Includes, done)
	s.build(early, head, includes, body)
	if strings.Contains(early+includes, layoutLine) {
		l2 := *s
		l2.build(strings.Replace(early, layoutLine, "local LAYOUT = 2\n", 1), head,
			strings.Replace(includes, layoutLine, "local LAYOUT = 2\n", 1), body)
		s.L2 = &l2
	}
	All = append(All, s)
	return s
}

// build sets the sources, functions and libraries of s from its parts.
func (s *Script) build(early, head, includes, body string) {
	s.Source = early + head + includes + body
	s.ShardedSource = s.Source
	s.Function, s.Library = library(s.Name, early+includes, head+body)
	s.ShardedFunction, s.ShardedLibrary = s.Function, s.Library
	if s.Publishes {
		s.ShardedSource = Sharded(s.Source)
		s.ShardedFunction, s.ShardedLibrary = library(s.Name, Sharded(early+includes), Sharded(head+body))
	}
}

// Key sets the entries take.
func timerKeys(sp keyspace.Space, _ string) []string { return sp.Keys() }

// metaKeys are the seven keys and the shard's timer meta hash.
func metaKeys(sp keyspace.Space, _ string) []string { return append(sp.Keys(), sp.TimerMeta()) }

func recurKeys(sp keyspace.Space, _ string) []string {
	return append(sp.Keys(), sp.TimerMeta(), sp.Owners(), sp.Epochs(), sp.Deliveries(), sp.EndpointNames(), sp.Schedules(), sp.SchedDue())
}

// holdKeys are claim's keys and the shard's hold hash.
func holdKeys(sp keyspace.Space, _ string) []string {
	return append(sp.Keys(), sp.Traces(), sp.Quarantine(), sp.Hold(), sp.Deliveries(), sp.TimerMeta())
}

// flowKeys are a shard's fire stream and its flow-control sets of group.
func flowKeys(sp keyspace.Space, group string) []string {
	return []string{sp.Fires(), sp.FlowReady(group), sp.FlowParked(group), sp.FlowHint(group)}
}

func workerKeys(sp keyspace.Space, _ string) []string {
	ns := sp.Namespace()
	return []string{ns.Workers(), ns.WorkersSeen()}
}

// The table.
var (
	// Schedule creates timers that do not exist yet (schedule.lua).
	Schedule = add(&Script{Name: "schedule", Includes: []string{"acl_probe", "check_traces", "check_type", "clock_now", "decode", "due_of", "encode", "fmt", "full", "is_due", "malformed", "meta", "over_quota", "pending_end", "publish", "refusal", "resolve_due"}, Publishes: true,
		Keys: func(sp keyspace.Space, _ string) []string {
			keys := append(sp.Keys(), sp.Traces(), sp.Deliveries(), sp.EndpointNames(), sp.TimerMeta(), sp.Owners(), sp.Epochs())
			if sp.Count() == 1 {
				// A namespace created with more shards after the client
				// read its layout refuses the one-shard write.
				keys = append(keys, sp.Namespace().Meta())
			}
			return keys
		},
		Commands: []string{"type", "time", "hmget", "zscore", "hexists", "zcount", "zadd", "hset", "hget", "zrangebyscore"}})
	// Claim fires due timers exactly once (claim.lua).
	Claim = add(&Script{Name: "claim", Early: []string{"clock_due", "pending_at"}, Includes: []string{"check_type", "check_types", "counters", "decode", "fire", "fmt", "layout", "probe", "quarantine", "refusal", "score_ms_of"}, Publishes: true, Worker: true,
		Keys: func(sp keyspace.Space, _ string) []string {
			return append(sp.Keys(), sp.Traces(), sp.Quarantine(), sp.Deliveries(), sp.TimerMeta(), sp.Owners())
		},
		Commands: []string{"type", "time", "zrangebyscore", "hmget", "zrange", "zremrangebyrank", "hset", "zadd",
			"xadd", "hincrby", "hdel", "zrem"}})
	// Hold decides a claim in a namespace with replicas, firing nothing
	// until Commit (hold.lua).
	Hold = add(&Script{Name: "hold", Early: []string{"clock_due", "clock_ms", "fmt", "pending_at"}, Includes: []string{"check_type", "check_types", "counters", "decode", "fmt", "probe", "probe_all", "quarantine", "refusal", "score_ms"}, Worker: true,
		// The owner index after commit's keys: a quarantined timer's entry
		// goes with it (includes/quarantine.lua).
		Keys:     func(sp keyspace.Space, g string) []string { return append(holdKeys(sp, g), sp.Owners()) },
		Commands: []string{"type", "time", "hmget", "hset", "zrangebyscore", "zrange", "zrem", "hdel", "hincrby"}})
	// Commit fires what Hold decided, once WAIT saw replicas have it
	// (commit.lua).
	Commit = add(&Script{Name: "commit", Includes: []string{"check_type", "check_types", "counters", "decode", "due_of", "fire", "fmt", "layout", "ms_of", "pending_end", "probe"}, Publishes: true, Worker: true, Keys: holdKeys,
		Commands: []string{"type", "hmget", "zscore", "zrange", "zrangebyscore", "hdel", "zrem", "hset", "zadd", "xadd", "xtrim",
			"hincrby"}})
	// Cancel cancels a scheduled timer (cancel.lua).
	Cancel = add(&Script{Name: "cancel", Includes: []string{"cancel_timer", "check_types", "decode", "due_of", "malformed", "now_ms", "probe_all"}, Keys: timerKeys, Publishes: true,
		Commands: []string{"type", "hget", "zscore", "time", "zadd", "hset", "zrem"}})
	// CancelBatch is one step of a bulk cancel on one shard (cancel_batch.lua);
	// group is the bulk cancel job's ID, whose progress on the shard it keeps.
	CancelBatch = add(&Script{Name: "cancel_batch", Includes: []string{"cancel_timer", "check_type", "check_types", "decode", "due_of", "now_ms", "probe_all"}, Publishes: true,
		Keys: func(sp keyspace.Space, job string) []string {
			return append(sp.Keys(), sp.CancelProgress(job), sp.TimerMeta(), sp.Owners())
		},
		Commands: []string{"type", "hmget", "hscan", "zrangebylex", "zscore", "time", "zadd", "hset", "zrem"}})
	// Reschedule moves a scheduled timer (reschedule.lua).
	Reschedule = add(&Script{Name: "reschedule", Includes: []string{"check_types", "decode", "is_due", "malformed", "probe", "resolve_due", "wake"}, Keys: timerKeys, Publishes: true,
		Commands: []string{"type", "hget", "time", "zadd", "zrangebyscore"}})
	// Debounce creates a debounce key's window timer or pushes it back,
	// within the window's maximum wait (debounce.lua); group is the
	// debounce key.
	Debounce = add(&Script{Name: "debounce", Includes: []string{"check_type", "check_types", "clock_ms", "decode", "due_of", "encode", "fmt", "fmt_due", "is_ms", "layout_marker", "malformed", "meta", "over_quota", "pending_end", "probe_all", "resolve_due", "wake"}, Publishes: true,
		Keys: func(sp keyspace.Space, key string) []string {
			keys := append(sp.Keys(), sp.Schedules(), sp.Debounce(key), sp.Traces(), sp.Deliveries(), sp.EndpointNames(),
				sp.TimerMeta(), sp.Owners(), sp.Epochs())
			if sp.Count() == 1 {
				keys = append(keys, sp.Namespace().Meta()) // as Schedule
			}
			return keys
		},
		Commands: []string{"type", "time", "get", "hget", "zscore", "hexists", "zcount", "zadd", "hset", "set", "hdel", "zrangebyscore"}})
	// DebounceRestore writes an exported debounce window's timer and
	// reopens its window (debounce_restore.lua); group is the debounce key.
	DebounceRestore = add(&Script{Name: "debounce_restore", Includes: []string{"check_type", "check_types", "encode", "fmt", "full", "is_due", "layout", "now_ms", "probe_all", "settled_score", "wake"}, Publishes: true,
		Keys: func(sp keyspace.Space, key string) []string {
			return append(sp.Keys(), sp.Schedules(), sp.Debounce(key), sp.TimerMeta(), sp.Owners(), sp.Epochs())
		},
		Commands: []string{"type", "hget", "zscore", "time", "get", "zadd", "hset", "set", "zrangebyscore"}})
	// Purge removes settled timers past their retention (purge.lua).
	Purge = add(&Script{Name: "purge", Includes: []string{"check_hash", "check_traces", "check_type", "check_types", "fmt", "layout", "now_ms", "pending_end", "probe_all"}, Worker: true,
		Keys: func(sp keyspace.Space, _ string) []string {
			return append(sp.Keys(), sp.Traces(), sp.Deliveries(), sp.TimerMeta(), sp.Owners())
		},
		Commands: []string{"type", "time", "zrangebyscore", "zcount", "zremrangebyrank", "hdel", "hmget", "zrem"}})
	// Stats reports counts and the overdue backlog (stats.lua).
	Stats = add(&Script{Name: "stats", Includes: []string{"check_types", "clock_due", "fmt", "layout", "pending_at", "pending_end"}, Keys: timerKeys, Worker: true,
		Commands: []string{"type", "time", "zrange", "zcard", "zcount"}})
	// Horizon counts the timers due within each of a few offsets from
	// the server clock (horizon.lua): the due-horizon gauge's one read.
	Horizon = add(&Script{Name: "horizon", Includes: []string{"check_type", "clock_due"}, Worker: true,
		Keys:     func(sp keyspace.Space, _ string) []string { return []string{sp.Due()} },
		Commands: []string{"type", "time", "zcount"}})
	// Epoch reads or raises an owner's fencing epoch on a shard (epoch.lua).
	Epoch = add(&Script{Name: "epoch", Includes: []string{"check_type", "fmt", "refusal"},
		Keys:     func(sp keyspace.Space, _ string) []string { return []string{sp.Epochs()} },
		Commands: []string{"type", "hget", "hset"}})
	// OwnerWake counts an owner's scheduled timers on a shard and finds
	// the earliest (owner_wake.lua).
	OwnerWake = add(&Script{Name: "owner_wake", Includes: []string{"check_type", "fmt_due", "pending_end"},
		Keys:     func(sp keyspace.Space, _ string) []string { return []string{sp.Owners(), sp.Due()} },
		Commands: []string{"type", "zrangebylex", "zmscore"}})
	// List pages through timers in due order (list.lua).
	List = add(&Script{Name: "list", Includes: []string{"check_type", "check_types", "fmt", "fmt_due", "full_or_bad", "layout", "pending_end"}, Keys: metaKeys,
		Commands: []string{"type", "zscore", "zrank", "zrange", "zrangebyscore", "hmget"}})
	// Get reads one timer (get.lua).
	Get = add(&Script{Name: "get", Includes: []string{"check_type", "check_types", "full_or_bad", "malformed"}, Keys: metaKeys, Commands: []string{"type", "hget", "zscore"}})
	// Check checks, changing nothing, that the Redis user may run what a
	// worker's scripts run (check.lua).
	Check = add(&Script{Name: "check", Includes: []string{"check_types", "probe_all", "publish", "refusal"}, Keys: timerKeys, Publishes: true,
		Commands: []string{"type", "time", "zrange", "zrangebyscore", "zscore", "zcount", "zcard", "hget", "hmget",
			"zremrangebyrank", "zremrangebyscore", "zadd", "zrem", "hset", "hdel", "xadd", "xtrim", "hincrby"}})
	// Restore writes exported timers with their states and times
	// (restore.lua); it reads the shard's schedules.
	Restore = add(&Script{Name: "restore", Includes: []string{"check_type", "check_types", "encode", "fmt", "full", "is_due", "layout", "over_quota", "pending_end", "probe_all", "settled_score", "wake"}, Publishes: true,
		Keys: func(sp keyspace.Space, _ string) []string {
			return append(sp.Keys(), sp.Schedules(), sp.TimerMeta(), sp.Owners(), sp.Epochs())
		},
		Commands: []string{"type", "hget", "zscore", "zcount", "zadd", "hset", "zrangebyscore"}})
	// Requeue moves a dead letter back onto the fire stream (requeue.lua).
	Requeue = add(&Script{Name: "requeue", Includes: []string{"check_type", "probe_all"},
		Keys:     func(sp keyspace.Space, _ string) []string { return []string{sp.Fires(), sp.DeadLetter()} },
		Commands: []string{"type", "xrange", "xadd", "xdel"}})
	// Heartbeat renews or ends a worker's membership of the namespace
	// (heartbeat.lua).
	Heartbeat = add(&Script{Name: "heartbeat", Includes: []string{"check_type", "fmt", "now_ms", "probe_all", "read_probe"}, Worker: true,
		Keys: func(sp keyspace.Space, g string) []string {
			return append(workerKeys(sp, g), sp.Namespace().Meta())
		},
		Commands: []string{"type", "time", "hmget", "zrange", "hset", "zadd", "zrem", "zremrangebyscore"}})
	// Workers reads the namespace's live workers (workers.lua).
	Workers = add(&Script{Name: "workers", Includes: []string{"check_type", "fmt", "now_ms"}, Keys: workerKeys,
		Commands: []string{"type", "time", "hmget", "zrangebyscore"}})
	// Overlap applies the schedules' overlap policies to one consumer
	// group's deliveries (overlap.lua).
	Overlap = add(&Script{Name: "overlap", Includes: []string{"check_type", "probe_all", "sdecode"},
		Keys: func(sp keyspace.Space, group string) []string {
			return []string{sp.Fires(), sp.Schedules(), sp.Overlap(group), sp.Counters()}
		},
		Commands: []string{"type", "hget", "xpending", "xack", "hincrby", "hset", "hdel"}})
	// RecurLoad reads schedules and their pending occurrences (recur_load.lua).
	RecurLoad = add(&Script{Name: "recur_load", Includes: []string{"check_recur_types", "fmt", "fmt_due", "now_ms", "occ_id", "pending_end", "probe", "recur_keys", "sdecode", "split"}, Keys: recurKeys, Worker: true,
		Commands: []string{"type", "time", "zrangebyscore", "hget", "zscore", "zadd"}})
	// RecurArm tops up active schedules with new occurrences (recur_arm.lua).
	RecurArm = add(&Script{Name: "recur_arm", Includes: []string{"check_recur_types", "check_type", "encode", "fmt", "meta", "now_ms", "occ_id", "pending_end", "probe_all", "recur_keys", "sdecode", "sencode", "split", "wake"}, Keys: recurKeys, Publishes: true, Worker: true,
		Commands: []string{"type", "time", "hget", "zscore", "hset", "zadd", "zrem", "zrangebyscore"}})
	// RecurPut creates, updates, pauses, resumes or deletes a schedule
	// (recur_put.lua).
	// group is the schedule's ID, whose debounce window it reads.
	RecurPut = add(&Script{Name: "recur_put", Includes: []string{"cancel_timer", "check_hash", "check_recur_types", "check_type", "decode", "encode", "fmt", "fmt_due", "meta", "now_ms", "occ_id", "over_quota", "pending_end", "probe_all", "recur_keys", "sdecode", "sencode", "split", "wake"}, Publishes: true,
		Keys: func(sp keyspace.Space, id string) []string {
			return append(append(sp.Keys(), sp.Debounce(id)), recurKeys(sp, "")[7:]...)
		},
		Commands: []string{"type", "time", "hget", "zscore", "hexists", "hlen", "hset", "zrem", "zadd", "hdel", "get", "zrangebyscore"}})
	// Lease hands one consumer of a group a batch of one shard's fire
	// events under leases: reclaims expired ones, dead-letters what
	// exceeded its attempts or is past its deadline, reads new entries
	// (lease.lua).
	Lease = add(&Script{Name: "lease", Includes: []string{"acl_probe", "check_type", "counters", "dead_letter", "deadline", "fmt", "now_ms", "read_probe", "refusal"},
		Keys: func(sp keyspace.Space, _ string) []string {
			return append(sp.Keys(), sp.DeadLetter(), sp.LeaseCursors())
		},
		Commands: []string{"type", "time", "xpending", "hget", "xack", "xadd", "hset", "hincrby", "xgroup",
			"xclaim", "xreadgroup", "xrevrange"}})
	// Release hands a leased delivery back, dead-letters it (also when its
	// redelivery would come past its deadline) or extends its lease
	// (release.lua).
	Release = add(&Script{Name: "release", Includes: []string{"check_type", "counters", "dead_letter", "deadline", "fmt", "now_ms", "probe_all", "refusal"},
		Keys:     func(sp keyspace.Space, _ string) []string { return append(sp.Keys(), sp.DeadLetter()) },
		Commands: []string{"type", "time", "xpending", "xclaim", "xrange", "xadd", "xack", "hincrby", "hset"}})
	// FlowTake grants deliveries of flows their rate and in-flight slots,
	// in the flows' home shard (flow_take.lua). Its keys are the flows'
	// states, which the caller gives; Keys names one, for one flow.
	FlowTake = add(&Script{Name: "flow_take", Includes: []string{"check_type", "fmt", "now_ms", "probe_all", "refusal"},
		Keys: func(sp keyspace.Space, group string) []string {
			return []string{sp.FlowState(group, keyspace.FlowID("", "k"))}
		},
		Commands: []string{"type", "time", "zscore", "zcount", "zadd", "zremrangebyscore", "pexpire"}})
	// FlowPark parks leased fires that flow control holds back
	// (flow_park.lua).
	FlowPark = add(&Script{Name: "flow_park", Includes: []string{"check_type", "probe_all", "refusal"}, Keys: flowKeys,
		Commands: []string{"type", "xpending", "xack", "zadd", "hset"}})
	// FlowPop hands a consumer parked fires whose flows may be tried
	// again (flow_pop.lua).
	FlowPop = add(&Script{Name: "flow_pop", Includes: []string{"check_type", "fmt", "now_ms", "probe_all", "refusal"}, Keys: flowKeys,
		Commands: []string{"type", "time", "zrangebyscore", "hmget", "zlexcount", "zrangebylex", "xrange", "xclaim", "zrem",
			"zadd", "hdel"}})
	// EndpointPut creates or replaces one endpoint within the namespace's
	// endpoints quota (endpoint_put.lua); its key is the namespace's.
	EndpointPut = add(&Script{Name: "endpoint_put", Includes: []string{"check_type", "over_quota"},
		Keys:     func(sp keyspace.Space, _ string) []string { return []string{sp.Namespace().Endpoints()} },
		Commands: []string{"type", "hexists", "hlen", "hset"}})
	// Create writes a namespace's meta key unless it exists (create.lua).
	// Upgrade moves a shard from layout 1 to layout 2, a step at a time
	// (upgrade.lua).
	Upgrade = add(&Script{Name: "upgrade", Includes: []string{"decode", "fmt", "layout_marker", "now_ms", "pending_end", "probe", "refusal"},
		Keys: func(sp keyspace.Space, _ string) []string {
			return []string{sp.LegacyDue(), sp.Sched(), sp.Timers(), sp.Fired(), sp.Cancelled(), sp.Expire()}
		},
		Commands: []string{"type", "exists", "get", "zrange", "hmget", "zcard", "time", "set", "rename", "zadd", "zrem", "zremrangebyrank"}})
	Create = add(&Script{Name: "create", Includes: []string{"fmt", "layout_marker", "now_ms", "refusal"},
		Keys: func(sp keyspace.Space, _ string) []string {
			ns := sp.Namespace()
			s := keyspace.Shard(string(ns), 0, 1)
			return []string{ns.Meta(), s.LegacyDue(), s.Sched(), s.Timers(), s.Fired(), s.Cancelled(), s.Expire(), s.Fires(),
				s.Schedules(), s.SchedDue()}
		},
		Commands: []string{"hget", "type", "get", "time", "hset"}})
)
