package queue

import (
	"context"
	"strings"

	"github.com/redis/go-redis/v9"

	lua "github.com/timerq/timerq/scripts/lua"
)

// script is one script of the table (scripts/lua) in one pub/sub flavour,
// in both of the forms Redis runs: a Redis function (FCALL, Redis 7.0 and
// later), whose includes Redis defines once, when it loads the library,
// and the EVAL script (the embedded *redis.Script), whose includes Redis
// defines again on every call. A claim that fires, or a schedule, costs
// Redis 3-5% fewer instructions as a function (BENCHMARKS.md, "Redis
// functions").
// The runner (Queue.runScript, Queue.scriptCmd) calls the function while
// the server and the user allow it and the script otherwise; both run the
// same text, so they answer and refuse alike.
type script struct {
	*redis.Script
	function, library string
}

// redisScripts holds each script of the table in both pub/sub flavours:
// [0] classic, [1] sharded.
var redisScripts = func() map[*lua.Script][2]*script {
	m := make(map[*lua.Script][2]*script, len(lua.All))
	for _, entry := range lua.All {
		for _, s := range entry.Layouts() {
			m[s] = [2]*script{
				{redis.NewScript(s.Source), s.Function, s.Library},
				{redis.NewScript(s.ShardedSource), s.ShardedFunction, s.ShardedLibrary},
			}
		}
	}
	return m
}()

// classic returns script s in its classic flavour, for the scripts that
// run outside a layout; they publish nothing, so it is their only one.
func classic(s *lua.Script) *script { return redisScripts[s][0] }

// functions reports whether q calls its scripts as Redis functions. It
// starts true and turns false, for the Queue's life, at the first sign
// that this server or this user cannot: Redis before 7.0 and miniredis do
// not know FCALL; an ACL without +fcall or +function|load refuses it.
// Scripts then run by EVALSHA, as they always could, and need no further
// right.
func (q *Queue) functions() bool { return !q.noFunctions.Load() }

// scriptCmd queues one call of s on c (a client or a pipeline): FCALL
// while q uses functions, else EVALSHA. Its error, when there is one,
// goes through retryable before anything else reads it.
func (q *Queue) scriptCmd(ctx context.Context, c redis.Cmdable, s *script, fn bool, keys []string, args ...any) *redis.Cmd {
	if fn {
		return c.FCall(ctx, s.function, keys, args...)
	}
	return s.EvalSha(ctx, c, keys, args...)
}

// scriptRetry is what a failed call of a script asks for before its error
// counts.
type scriptRetry int

const (
	// retryNone: the error is the script's (or Redis's) answer.
	retryNone scriptRetry = iota
	// retryLoad: the server does not have the script or function yet (a
	// restarted server, a new Cluster master, the first call): load it
	// (loadScript), then call again.
	retryLoad
	// retryEval: FCALL did not run, and EVALSHA may: the server or the
	// user cannot use functions (q.noFunctions is now set), or the server
	// refused the function whole (OOM, READONLY, MISCONF, NOREPLICAS) where
	// a script is refused only at its first write and may answer a read
	// without one (a replayed Schedule finding its timer under OOM).
	retryEval
)

// retryable classifies err, the error of a call of a script made as a
// function when fn is true. It sets q.noFunctions when the error shows
// that functions cannot be used.
func (q *Queue) retryable(err error, fn bool) scriptRetry {
	if err == nil {
		return retryNone
	}
	if !fn {
		if hasRedisCode(err, "NOSCRIPT") {
			return retryLoad
		}
		return retryNone
	}
	msg := err.Error()
	switch {
	case strings.Contains(msg, "Function not found"):
		return retryLoad
	case functionsUnusable(err):
		q.noFunctions.Store(true)
		return retryEval
	}
	for _, code := range []string{"OOM", "READONLY", "MISCONF", "NOREPLICAS"} {
		if redis.HasErrorPrefix(err, code) {
			return retryEval
		}
	}
	return retryNone
}

// functionsUnusable reports whether err is the server not knowing FCALL
// or FUNCTION (Redis before 7.0, miniredis) or the ACL refusing the user
// either.
func functionsUnusable(err error) bool {
	msg := strings.ToLower(err.Error())
	if strings.Contains(msg, "unknown command") {
		return strings.Contains(msg, "fcall") || strings.Contains(msg, "function")
	}
	return redis.HasErrorPrefix(err, "NOPERM") &&
		(strings.Contains(msg, "'fcall' command") || strings.Contains(msg, "'function|load' command") ||
			strings.Contains(msg, "'function' command"))
}

// loadScript loads s where c sends it: its function library (FUNCTION
// LOAD REPLACE: the library's name carries its hash, so replacing one
// loaded already changes nothing) while q uses functions, else the script
// (SCRIPT LOAD). On a Cluster client both go to every master, as the
// calls after it may go to any. A user who may not load functions turns
// functions off (retryable) and gets the script loaded instead.
func (q *Queue) loadScript(ctx context.Context, c redis.Cmdable, s *script) error {
	if q.functions() {
		err := forEachMaster(ctx, c, func(ctx context.Context, m redis.Cmdable) error {
			return m.FunctionLoadReplace(ctx, s.library).Err()
		})
		if err == nil || q.retryable(err, true) != retryEval {
			return err
		}
	}
	return s.Load(ctx, c).Err()
}

// forEachMaster runs load on every master of a Cluster client, or on c.
func forEachMaster(ctx context.Context, c redis.Cmdable, load func(context.Context, redis.Cmdable) error) error {
	if cc, ok := c.(*redis.ClusterClient); ok {
		return cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error { return load(ctx, m) })
	}
	return load(ctx, c)
}

// runScript runs one call of s on c and returns its reply: as a function
// while q uses functions, loading the library when the server lacks it,
// and as a script otherwise (go-redis's Run: EVALSHA, then EVAL on
// NOSCRIPT).
func (q *Queue) runScript(ctx context.Context, c redis.Cmdable, s *script, keys []string, args ...any) *redis.Cmd {
	if q.functions() {
		cmd := c.FCall(ctx, s.function, keys, args...)
		switch q.retryable(cmd.Err(), true) {
		case retryNone:
			return cmd
		case retryLoad:
			if err := q.loadScript(ctx, c, s); err != nil {
				cmd.SetErr(err)
				return cmd
			}
			if q.functions() {
				cmd = c.FCall(ctx, s.function, keys, args...)
				if q.retryable(cmd.Err(), true) == retryNone {
					return cmd
				}
			}
		}
	}
	return s.Run(ctx, c, keys, args...)
}
