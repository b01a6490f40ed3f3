package queue

import (
	"context"
	"fmt"
)

// CheckPermissions checks, changing nothing, that the Redis user may do
// everything timerq does in this namespace: run the scripts (EVAL, EVALSHA
// and SCRIPT LOAD), every command they run on every key of the namespace,
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
	args := []any{q.TimerChannel(""), q.wakeChannel}
	fail := func(how string, err error) error {
		return fmt.Errorf("timerq: permission check (%s): %w", how, q.redisError(err))
	}
	// EVAL, as go-redis falls back to after a restart emptied the script
	// cache; then EVALSHA, as usual; then SCRIPT LOAD, as ScheduleBatch's
	// pipelines use on NOSCRIPT.
	if err := checkScript.Eval(ctx, q.rdb, q.keys, args...).Err(); err != nil {
		return fail("EVAL", err)
	}
	if err := checkScript.EvalSha(ctx, q.rdb, q.keys, args...).Err(); err != nil {
		return fail("EVALSHA", err)
	}
	if err := checkScript.Load(ctx, q.rdb).Err(); err != nil {
		return fail("SCRIPT LOAD", err)
	}
	for _, ch := range []string{q.wakeChannel, q.TimerChannel("")} {
		if err := q.checkSubscribe(ctx, ch); err != nil {
			return fail("SUBSCRIBE "+ch, err)
		}
	}
	return nil
}

// checkSubscribe subscribes to ch and waits for Redis to confirm or refuse.
func (q *Queue) checkSubscribe(ctx context.Context, ch string) error {
	ps := q.rdb.Subscribe(ctx, ch)
	defer ps.Close()
	_, err := ps.Receive(ctx)
	return err
}
