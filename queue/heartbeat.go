package queue

import (
	"context"
	"time"

	"github.com/timerq/timerq/internal/keyspace"
	"github.com/timerq/timerq/scripts/lua"
)

// Heartbeat renews worker's membership of the namespace for ttl, by the
// Redis clock, or ends it when leave is set, and returns the live members,
// sorted. It also reads the namespace's meta key: a changed shard count or
// replicas setting makes the queue's next call adopt it. Pollers call it to share a sharded namespace's shards (see
// package poller); applications rarely need to.
func (en Engine) Heartbeat(ctx context.Context, worker string, ttl time.Duration, leave bool) ([]string, error) {
	q := en.q
	flag := "0"
	if leave {
		flag = "1"
	}
	keys := lua.Heartbeat.Keys(keyspace.Shard(q.opts.Namespace, 0, 1), "")
	res, err := q.runScript(ctx, q.rdb, classic(lua.Heartbeat), keys, worker, ttl.Milliseconds(), flag).StringSlice()
	if err != nil {
		return nil, errorf("heartbeat: %w", q.redisError(err))
	}
	if len(res) < 3 {
		return nil, errorf("heartbeat: unexpected reply %v", res)
	}
	q.noteMeta(res[1], res[2])
	return res[3:], nil
}

// Worker is one live member of a namespace's workers.
type Worker struct {
	// ID is the worker's ID (poller.Options.WorkerID).
	ID string
	// Expires is when its membership lapses without another heartbeat, by
	// the Redis clock.
	Expires time.Time
}

// WorkerStatus says who serves a namespace: the live workers, and the
// latest heartbeat, which outlives them.
type WorkerStatus struct {
	// Now is the Redis server's clock when it was read.
	Now time.Time
	// Live are the workers whose membership has not lapsed, by ID.
	Live []Worker
	// LastSeen is the Redis time of the namespace's latest heartbeat, by
	// any worker, live or gone; zero if no worker ever served it (or none
	// since this was recorded).
	LastSeen time.Time
	// LastWorker is the worker that sent that heartbeat.
	LastWorker string
	// LastLeft means that heartbeat was the worker leaving (a clean stop);
	// false after a crash or lost connection, whose membership just lapsed.
	LastLeft bool
}

// Workers reports the namespace's live workers and its latest heartbeat,
// by the Redis clock, in one read (O(W) for W workers). With no live
// worker, nothing fires the namespace's timers.
func (in Inspector) Workers(ctx context.Context) (WorkerStatus, error) {
	q := in.q
	keys := lua.Workers.Keys(keyspace.Shard(q.opts.Namespace, 0, 1), "")
	r, err := q.runScript(ctx, q.rdb, classic(lua.Workers), keys).StringSlice()
	if err != nil {
		return WorkerStatus{}, errorf("workers: %w", q.redisError(err))
	}
	if len(r) < 4 || len(r)%2 != 0 {
		return WorkerStatus{}, errorf("workers: unexpected reply %v", r)
	}
	ws := WorkerStatus{Now: fromMillis(atoi(r[0])), LastWorker: r[2], LastLeft: r[3] == "1"}
	if r[1] != "" {
		ws.LastSeen = fromMillis(atoi(r[1]))
	}
	for i := 4; i+1 < len(r); i += 2 {
		ws.Live = append(ws.Live, Worker{ID: r[i], Expires: fromMillis(atoi(r[i+1]))})
	}
	return ws, nil
}
