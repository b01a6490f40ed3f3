package queue

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/timerq/timerq/internal/keyspace"
	"github.com/timerq/timerq/scripts/lua"
)

// recurScripts are the recurring-schedule scripts in one pub/sub flavour.
type recurScripts struct{ load, arm, put *redis.Script }

func newRecurScripts(sharded bool) *recurScripts {
	src := func(s string) *redis.Script {
		if sharded {
			s = lua.Sharded(s)
		}
		return redis.NewScript(s)
	}
	return &recurScripts{load: src(lua.RecurLoad), arm: src(lua.RecurArm), put: src(lua.RecurPut)}
}

var (
	classicRecurScripts = newRecurScripts(false)
	shardedRecurScripts = newRecurScripts(true)
)

// recurring returns the scripts and keys of the namespace's recurring
// schedules: the timer keys, then the schedules hash and the sched-due set
// (scripts/lua/recur_prelude.lua). A schedule's scripts write its
// occurrences and its own record in one call, so they need one Cluster
// slot: that of an unsharded namespace, whose timer keys and
// namespace-wide keys share the tag {NS}. A sharded namespace is refused
// for now (docs/recurring.md says how it can come).
func (q *Queue) recurring(ctx context.Context) (*recurScripts, []string, error) {
	l, err := q.layout(ctx)
	if err != nil {
		return nil, nil, err
	}
	if len(l.spaces) != 1 {
		return nil, nil, fmt.Errorf("%w: namespace %q has %d shards, and recurring schedules need a namespace of 1 shard for now; keep schedules in an unsharded namespace",
			ErrInvalidOptions, q.opts.Namespace, len(l.spaces))
	}
	s := classicRecurScripts
	if l.sharded {
		s = shardedRecurScripts
	}
	return s, append(l.spaces[0].Keys(), q.RecurringKeys()...), nil
}

// RecurringKeys returns the two keys that hold the namespace's recurring
// schedules: the schedules hash and the sched-due sorted set. Occurrences
// are ordinary timers in the keys Keys returns.
func (q *Queue) RecurringKeys() []string {
	ns := keyspace.Namespace(q.opts.Namespace)
	return []string{ns.Schedules(), ns.SchedDue()}
}
