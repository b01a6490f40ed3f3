package lua

import "github.com/timerq/timerq/internal/keyspace"

// Script is one entry of the table of timerq's Redis scripts.
type Script struct {
	// Name is the script's file, without ".lua".
	Name string
	// Source is the script as loaded: prelude.lua, the extra prelude if
	// any, then the script's file.
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

	prelude string // an extra prelude file, read after prelude.lua
}

// All is the table: every script timerq runs, in the order of the entries
// below. To add a script, write its .lua file (with the header the others
// have) and one entry; the tests run every entry as Redis users lacking
// each of its rights (internal/aclright).
var All []*Script

func add(s *Script) *Script {
	s.Source = file("prelude")
	if s.prelude != "" {
		s.Source += file(s.prelude)
	}
	s.Source += file(s.Name)
	s.ShardedSource = s.Source
	if s.Publishes {
		s.ShardedSource = Sharded(s.Source)
	}
	All = append(All, s)
	return s
}

// Key sets the entries take.
func timerKeys(sp keyspace.Space, _ string) []string { return sp.Keys() }

func recurKeys(sp keyspace.Space, _ string) []string {
	return append(sp.Keys(), sp.Deliveries(), sp.EndpointNames(), sp.Schedules(), sp.SchedDue())
}

// holdKeys are claim's keys and the shard's hold hash.
func holdKeys(sp keyspace.Space, _ string) []string {
	return append(sp.Keys(), sp.Traces(), sp.Quarantine(), sp.Hold(), sp.Deliveries())
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
	Schedule = add(&Script{Name: "schedule", Publishes: true,
		Keys: func(sp keyspace.Space, _ string) []string {
			keys := append(sp.Keys(), sp.Traces(), sp.Deliveries(), sp.EndpointNames())
			if sp.Count() == 1 {
				// A namespace created with more shards after the client
				// read its layout refuses the one-shard write.
				keys = append(keys, sp.Namespace().Meta())
			}
			return keys
		},
		Commands: []string{"type", "time", "zrange", "hmget", "zscore", "hexists", "zcount", "zadd", "hset", "hget"}})
	// Claim fires due timers exactly once (claim.lua).
	Claim = add(&Script{Name: "claim", Publishes: true, Worker: true,
		Keys: func(sp keyspace.Space, _ string) []string {
			return append(sp.Keys(), sp.Traces(), sp.Quarantine(), sp.Deliveries())
		},
		Commands: []string{"type", "time", "zrangebyscore", "hmget", "zrange", "zremrangebyrank", "hset", "zadd",
			"xadd", "hincrby", "hdel"}})
	// Hold decides a claim in a namespace with replicas, firing nothing
	// until Commit (hold.lua).
	Hold = add(&Script{Name: "hold", Worker: true, Keys: holdKeys,
		Commands: []string{"type", "time", "hmget", "hset", "zrangebyscore", "zrange", "zrem", "hdel", "hincrby"}})
	// Commit fires what Hold decided, once WAIT saw replicas have it
	// (commit.lua).
	Commit = add(&Script{Name: "commit", Publishes: true, Worker: true, Keys: holdKeys,
		Commands: []string{"type", "hmget", "zscore", "zrange", "hdel", "zrem", "hset", "zadd", "xadd", "xtrim",
			"hincrby"}})
	// Cancel cancels a scheduled timer (cancel.lua).
	Cancel = add(&Script{Name: "cancel", Keys: timerKeys, Publishes: true,
		Commands: []string{"type", "hget", "zscore", "time", "zadd", "hset", "zrem"}})
	// Reschedule moves a scheduled timer (reschedule.lua).
	Reschedule = add(&Script{Name: "reschedule", Keys: timerKeys, Publishes: true,
		Commands: []string{"type", "hget", "time", "zrange", "zadd"}})
	// Debounce creates a debounce key's window timer or pushes it back,
	// within the window's maximum wait (debounce.lua); group is the
	// debounce key.
	Debounce = add(&Script{Name: "debounce", Publishes: true,
		Keys: func(sp keyspace.Space, key string) []string {
			keys := append(sp.Keys(), sp.Schedules(), sp.Debounce(key), sp.Traces(), sp.Deliveries(), sp.EndpointNames())
			if sp.Count() == 1 {
				keys = append(keys, sp.Namespace().Meta()) // as Schedule
			}
			return keys
		},
		Commands: []string{"type", "time", "get", "hget", "zscore", "zrange", "hexists", "zcount", "zadd", "hset", "set", "hdel"}})
	// DebounceRestore writes an exported debounce window's timer and
	// reopens its window (debounce_restore.lua); group is the debounce key.
	DebounceRestore = add(&Script{Name: "debounce_restore", Publishes: true,
		Keys: func(sp keyspace.Space, key string) []string {
			return append(sp.Keys(), sp.Schedules(), sp.Debounce(key))
		},
		Commands: []string{"type", "hget", "zscore", "time", "get", "zrange", "zadd", "hset", "set"}})
	// Purge removes settled timers past their retention (purge.lua).
	Purge = add(&Script{Name: "purge", Worker: true,
		Keys: func(sp keyspace.Space, _ string) []string {
			return append(sp.Keys(), sp.Traces(), sp.Deliveries())
		},
		Commands: []string{"type", "time", "zrangebyscore", "zcount", "zremrangebyrank", "hdel", "zrem"}})
	// Stats reports counts and the overdue backlog (stats.lua).
	Stats = add(&Script{Name: "stats", Keys: timerKeys, Worker: true,
		Commands: []string{"type", "time", "zrange", "zcard", "zcount"}})
	// List pages through timers in due order (list.lua).
	List = add(&Script{Name: "list", Keys: timerKeys,
		Commands: []string{"type", "zscore", "zrank", "zrange", "zrangebyscore", "hmget"}})
	// Get reads one timer (get.lua).
	Get = add(&Script{Name: "get", Keys: timerKeys, Commands: []string{"type", "hget", "zscore"}})
	// Check checks, changing nothing, that the Redis user may run what a
	// worker's scripts run (check.lua).
	Check = add(&Script{Name: "check", Keys: timerKeys, Publishes: true,
		Commands: []string{"type", "time", "zrange", "zrangebyscore", "zscore", "zcount", "zcard", "hget", "hmget",
			"zremrangebyrank", "zremrangebyscore", "zadd", "zrem", "hset", "hdel", "xadd", "xtrim", "hincrby"}})
	// Restore writes exported timers with their states and times
	// (restore.lua); it reads the shard's schedules.
	Restore = add(&Script{Name: "restore", Publishes: true,
		Keys:     func(sp keyspace.Space, _ string) []string { return append(sp.Keys(), sp.Schedules()) },
		Commands: []string{"type", "zrange", "hget", "zscore", "zcount", "zadd", "hset"}})
	// Requeue moves a dead letter back onto the fire stream (requeue.lua).
	Requeue = add(&Script{Name: "requeue",
		Keys:     func(sp keyspace.Space, _ string) []string { return []string{sp.Fires(), sp.DeadLetter()} },
		Commands: []string{"type", "xrange", "xadd", "xdel"}})
	// Heartbeat renews or ends a worker's membership of the namespace
	// (heartbeat.lua).
	Heartbeat = add(&Script{Name: "heartbeat", Worker: true,
		Keys: func(sp keyspace.Space, g string) []string {
			return append(workerKeys(sp, g), sp.Namespace().Meta())
		},
		Commands: []string{"type", "time", "hmget", "zrange", "hset", "zadd", "zrem", "zremrangebyscore"}})
	// Workers reads the namespace's live workers (workers.lua).
	Workers = add(&Script{Name: "workers", Keys: workerKeys,
		Commands: []string{"type", "time", "hmget", "zrangebyscore"}})
	// Overlap applies the schedules' overlap policies to one consumer
	// group's deliveries (overlap.lua).
	Overlap = add(&Script{Name: "overlap",
		Keys: func(sp keyspace.Space, group string) []string {
			return []string{sp.Fires(), sp.Schedules(), sp.Overlap(group), sp.Counters()}
		},
		Commands: []string{"type", "hget", "xpending", "xack", "hincrby", "hset", "hdel"}})
	// RecurLoad reads schedules and their pending occurrences (recur_load.lua).
	RecurLoad = add(&Script{Name: "recur_load", prelude: "recur_prelude", Keys: recurKeys, Worker: true,
		Commands: []string{"type", "time", "zrangebyscore", "hget", "zscore", "zadd"}})
	// RecurArm tops up active schedules with new occurrences (recur_arm.lua).
	RecurArm = add(&Script{Name: "recur_arm", prelude: "recur_prelude", Keys: recurKeys, Publishes: true, Worker: true,
		Commands: []string{"type", "time", "zrange", "hget", "zscore", "hset", "zadd", "zrem"}})
	// RecurPut creates, updates, pauses, resumes or deletes a schedule
	// (recur_put.lua).
	// group is the schedule's ID, whose debounce window it reads.
	RecurPut = add(&Script{Name: "recur_put", prelude: "recur_prelude", Publishes: true,
		Keys: func(sp keyspace.Space, id string) []string {
			return append(append(sp.Keys(), sp.Debounce(id)), recurKeys(sp, "")[7:]...)
		},
		Commands: []string{"type", "time", "hget", "zscore", "hexists", "hlen", "zrange", "hset", "zrem", "zadd", "hdel", "get"}})
	// Lease hands one consumer of a group a batch of one shard's fire
	// events under leases: reclaims expired ones, dead-letters what
	// exceeded its attempts, reads new entries (lease.lua).
	Lease = add(&Script{Name: "lease",
		Keys: func(sp keyspace.Space, _ string) []string {
			return append(sp.Keys(), sp.DeadLetter(), sp.LeaseCursors())
		},
		Commands: []string{"type", "time", "xpending", "hget", "xack", "xadd", "hset", "xgroup",
			"xclaim", "xreadgroup", "xrevrange"}})
	// Release hands a leased delivery back, dead-letters it or extends its
	// lease (release.lua).
	Release = add(&Script{Name: "release",
		Keys:     func(sp keyspace.Space, _ string) []string { return append(sp.Keys(), sp.DeadLetter()) },
		Commands: []string{"type", "time", "xpending", "xclaim", "xrange", "xadd", "xack"}})
	// FlowTake grants deliveries of flows their rate and in-flight slots,
	// in the flows' home shard (flow_take.lua). Its keys are the flows'
	// states, which the caller gives; Keys names one, for one flow.
	FlowTake = add(&Script{Name: "flow_take",
		Keys: func(sp keyspace.Space, group string) []string {
			return []string{sp.FlowState(group, keyspace.FlowID("", "k"))}
		},
		Commands: []string{"type", "time", "zscore", "zcount", "zadd", "zremrangebyscore", "pexpire"}})
	// FlowPark parks leased fires that flow control holds back
	// (flow_park.lua).
	FlowPark = add(&Script{Name: "flow_park", Keys: flowKeys,
		Commands: []string{"type", "xpending", "xack", "zadd", "hset"}})
	// FlowPop hands a consumer parked fires whose flows may be tried
	// again (flow_pop.lua).
	FlowPop = add(&Script{Name: "flow_pop", Keys: flowKeys,
		Commands: []string{"type", "time", "zrangebyscore", "hmget", "zlexcount", "zrangebylex", "xrange", "xclaim", "zrem",
			"zadd", "hdel"}})
	// EndpointPut creates or replaces one endpoint within the namespace's
	// endpoints quota (endpoint_put.lua); its key is the namespace's.
	EndpointPut = add(&Script{Name: "endpoint_put",
		Keys:     func(sp keyspace.Space, _ string) []string { return []string{sp.Namespace().Endpoints()} },
		Commands: []string{"type", "hexists", "hlen", "hset"}})
	// Create writes a namespace's meta key unless it exists (create.lua).
	Create = add(&Script{Name: "create",
		Keys: func(sp keyspace.Space, _ string) []string {
			ns := sp.Namespace()
			s := keyspace.Shard(string(ns), 0, 1)
			return []string{ns.Meta(), s.Due(), s.Timers(), s.Fired(), s.Cancelled(), s.Expire(), s.Fires(),
				s.Schedules(), s.SchedDue()}
		},
		Commands: []string{"hget", "exists", "time", "hset"}})
)
