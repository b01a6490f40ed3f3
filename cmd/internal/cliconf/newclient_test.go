package cliconf_test

import (
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/timerq/timerq/cmd/internal/cliconf"
	"github.com/timerq/timerq/queue"
)

// TestNewClientFollowsClusterFailovers: the binaries' one constructor gives
// a Cluster client the short slot-map reload interval (and the
// reload-on-error hook, which TestMasterFailoverResumesInSeconds in poller
// exercises), and builds other clients as redis.NewUniversalClient does.
func TestNewClientFollowsClusterFailovers(t *testing.T) {
	for _, tc := range []struct {
		url     string
		cluster bool
	}{
		{"redis://127.0.0.1:1?addr=127.0.0.2:1", true},
		{"redis://127.0.0.1:1/0?cluster=1", true},
		{"redis://127.0.0.1:1/0", false},
	} {
		opts, err := cliconf.Conn{RedisURL: tc.url}.Options()
		if err != nil {
			t.Fatalf("%s: %v", tc.url, err)
		}
		rdb := cliconf.NewClient(opts)
		cc, ok := rdb.(*redis.ClusterClient)
		if ok != tc.cluster {
			t.Errorf("%s: %T, cluster %v", tc.url, rdb, tc.cluster)
		}
		if ok && cc.Options().ClusterStateReloadInterval != queue.ClusterStateReloadInterval {
			t.Errorf("%s: reload interval %v, want %v", tc.url, cc.Options().ClusterStateReloadInterval, queue.ClusterStateReloadInterval)
		}
		rdb.Close()
	}
}
