package queue

import (
	"context"

	"github.com/redis/go-redis/v9"

	"github.com/timerq/timerq/scripts/lua"
)

// CheckPermissions checks, changing nothing, that the Redis user may do
// everything a worker does in this namespace: run the scripts (EVAL, EVALSHA
// and SCRIPT LOAD), every command a worker's scripts run on every key of the
// namespace (not list.lua's ZRANK, which only timerctl runs),
// PUBLISH on its channels, and SUBSCRIBE to them. It returns nil, or an
// error wrapping ErrPermission that names the first missing right and the
// ACL rule granting it. Workers call it at start-up, so that a missing
// right is reported at once rather than at the first due timer.
//
// It publishes "probe" on the wake channel and on the timer channel of the
// empty ID, which no waiter can use; pollers ignore a wake message that is
// not a due time. Other errors (Redis unreachable, LOADING) are returned
// as they are.
func (q *Queue) CheckPermissions(ctx context.Context) error {
	l, err := q.layout(ctx)
	if err != nil {
		return err
	}
	// The last shard: with several shards its keys and channels carry
	// {NS:k}, the pattern an ACL rule for the namespace must also grant.
	last := len(l.spaces) - 1
	sp := l.space(last)
	checkScript, keys := l.script(lua.Check, last), lua.Check.Keys(sp, "")
	args := []any{sp.TimerChannel(""), sp.Wake()}
	fail := func(how string, err error) error {
		return errorf("permission check (%s): %w", how, q.redisError(err))
	}
	// EVAL, as go-redis falls back to after a restart emptied the script
	// cache; then EVALSHA, as usual; then SCRIPT LOAD, as ScheduleBatch's
	// pipelines use on NOSCRIPT.
	if err := checkScript.Eval(ctx, q.rdb, keys, args...).Err(); err != nil {
		return fail("EVAL", err)
	}
	if err := checkScript.EvalSha(ctx, q.rdb, keys, args...).Err(); err != nil {
		return fail("EVALSHA", err)
	}
	if err := checkScript.Load(ctx, q.rdb).Err(); err != nil {
		return fail("SCRIPT LOAD", err)
	}
	if l.replicas > 0 {
		// WAIT 0 0 returns at once: it checks the right, not the replicas.
		conn, err := q.shardConn(ctx, l, len(l.spaces)-1)
		if err == nil {
			err = conn.Do(ctx, "WAIT", 0, 0).Err()
		}
		if err != nil {
			return fail("WAIT, which the namespace's replicas setting needs", err)
		}
	}
	for _, ch := range []string{sp.Wake(), sp.TimerChannel("")} {
		if err := q.checkSubscribe(ctx, l.sharded, ch); err != nil {
			how := "SUBSCRIBE "
			if l.sharded {
				how = "SSUBSCRIBE "
			}
			return fail(how+ch, err)
		}
	}
	return nil
}

// checkSubscribe subscribes to ch (a shard channel when sharded) and waits
// for Redis to confirm or refuse.
func (q *Queue) checkSubscribe(ctx context.Context, sharded bool, ch string) error {
	var ps *redis.PubSub
	if sharded {
		ps = q.rdb.SSubscribe(ctx, ch)
	} else {
		ps = q.rdb.Subscribe(ctx, ch)
	}
	defer ps.Close()
	_, err := ps.Receive(ctx)
	return err
}
