package redistest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// AwaitPromotableReplicas waits until the Sentinel behind sc would promote
// each of the n replicas it monitors for master name: it lists exactly n,
// each flagged plain "slave" (connected, not down) and reporting its link
// to the master "ok". Sentinel lists a replica as soon as the master's
// INFO names it, seconds before it has connected to the replica and read
// its own INFO; a SENTINEL FAILOVER in that window is refused with
// NOGOODSLAVE. It fails the test after d.
func AwaitPromotableReplicas(t testing.TB, sc *redis.Client, name string, n int, d time.Duration) {
	t.Helper()
	Eventually(t, d, fmt.Sprintf("Sentinel %s to see %d promotable replicas of %q", sc.Options().Addr, n, name), func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		cmd := redis.NewMapStringStringSliceCmd(ctx, "SENTINEL", "REPLICAS", name)
		if sc.Process(ctx, cmd) != nil {
			return false
		}
		reps := cmd.Val()
		if len(reps) != n {
			return false
		}
		for _, r := range reps {
			if r["flags"] != "slave" || r["master-link-status"] != "ok" {
				return false
			}
		}
		return true
	})
}
