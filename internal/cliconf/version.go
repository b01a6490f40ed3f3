package cliconf

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Requirement is the oldest Redis version a feature of timerq runs on.
type Requirement struct {
	Feature      string
	Major, Minor int
}

// The minimum Redis version by feature, as docs/security.md lists them.
var (
	// NeedCore is schedule, claim, wait and the rest: Lua scripts, sorted
	// sets and the fire stream (XADD, XTRIM).
	NeedCore = Requirement{"timerq (streams and Lua scripts)", 5, 0}
	// NeedConsume is queue.Consume: XAUTOCLAIM.
	NeedConsume = Requirement{"Consume (XAUTOCLAIM)", 6, 2}
	// NeedShardedPubSub is sharded pub/sub on Cluster: SPUBLISH, SSUBSCRIBE.
	NeedShardedPubSub = Requirement{"sharded pub/sub (SPUBLISH)", 7, 0}
)

// String returns "<feature> needs Redis <major>.<minor>".
func (r Requirement) String() string {
	return fmt.Sprintf("%s needs Redis %d.%d or later", r.Feature, r.Major, r.Minor)
}

// ServerVersion asks INFO server for the server's Redis version (Valkey
// reports the Redis version it is compatible with, as redis_version). ok is
// false when the server does not say (miniredis, or INFO refused): the
// caller cannot check, and goes on.
func ServerVersion(ctx context.Context, rdb redis.UniversalClient) (major, minor int, version string, ok bool, err error) {
	info, err := rdb.Info(ctx, "server").Result()
	if err != nil {
		if _, isReply := err.(redis.Error); isReply {
			return 0, 0, "", false, nil // refused or unsupported: no answer
		}
		return 0, 0, "", false, err
	}
	for _, line := range strings.Split(info, "\n") {
		v, found := strings.CutPrefix(strings.TrimSpace(line), "redis_version:")
		if !found {
			continue
		}
		parts := strings.SplitN(v, ".", 3)
		if len(parts) < 2 {
			return 0, 0, v, false, nil
		}
		ma, err1 := strconv.Atoi(parts[0])
		mi, err2 := strconv.Atoi(parts[1])
		if err1 != nil || err2 != nil {
			return 0, 0, v, false, nil
		}
		return ma, mi, v, true, nil
	}
	return 0, 0, "", false, nil
}

// CheckServer refuses a Redis older than any of need with a usage-free
// runtime error (exit code 1) that names the feature, the version found
// and the version needed. A server that does not report its version
// passes. Errors reaching Redis are returned as they are, for Explain.
func CheckServer(ctx context.Context, rdb redis.UniversalClient, redacted string, need ...Requirement) error {
	major, minor, v, ok, err := ServerVersion(ctx, rdb)
	if err != nil || !ok {
		return err
	}
	for _, r := range need {
		if major < r.Major || major == r.Major && minor < r.Minor {
			return &Error{Code: ExitFailure,
				Problem: fmt.Sprintf("Redis at %s is version %s, too old: %s", redacted, v, r),
				Fix:     fmt.Sprintf("upgrade Redis to %d.%d or later (docs/security.md lists the minimum version by feature)", r.Major, r.Minor)}
		}
	}
	return nil
}
