package cliconf

import (
	"cmp"
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
	"github.com/urfave/cli/v2"
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

// infoField returns one field of an INFO reply.
func infoField(info, name string) string {
	for _, line := range strings.Split(info, "\n") {
		if v, found := strings.CutPrefix(strings.TrimSpace(line), name+":"); found {
			return v
		}
	}
	return ""
}

// parseVersion reads redis_version from an INFO server reply (Valkey
// reports the Redis version it is compatible with there). ok is false when
// the server does not say (miniredis).
func parseVersion(info string) (major, minor int, version string, ok bool) {
	v := infoField(info, "redis_version")
	parts := strings.SplitN(v, ".", 3)
	if len(parts) < 2 {
		return 0, 0, v, false
	}
	ma, err1 := strconv.Atoi(parts[0])
	mi, err2 := strconv.Atoi(parts[1])
	return ma, mi, v, err1 == nil && err2 == nil
}

// CheckServer refuses a Redis older than any of need with a usage-free
// runtime error (exit code 1) that names the feature, the version found
// and the version needed. A server that does not report its version
// passes. Errors reaching Redis are returned as they are, for Explain.
//
// It also refuses a Cluster node reached by a single-server URL, which
// would otherwise fail each command with MOVED.
func CheckServer(ctx context.Context, rdb redis.UniversalClient, redacted string, need ...Requirement) error {
	info, err := rdb.Info(ctx, "server").Result()
	if err != nil {
		if _, isReply := err.(redis.Error); isReply {
			return nil // refused or unsupported: cannot check
		}
		return err
	}
	// Redis says redis_mode:cluster, Valkey 8 server_mode:cluster.
	mode := cmp.Or(infoField(info, "redis_mode"), infoField(info, "server_mode"))
	if _, isCluster := rdb.(*redis.ClusterClient); mode == "cluster" && !isCluster {
		return &Error{Code: ExitFailure,
			Problem: fmt.Sprintf("Redis at %s is a Cluster node, and --redis treats it as a single server", redacted),
			Fix:     "add ?cluster=1 to --redis, or list the nodes: redis://node1:6379?addr=node2:6379&addr=node3:6379"}
	}
	major, minor, v, ok := parseVersion(info)
	if !ok {
		return nil
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

// BuildVersion returns the version a binary reports: set, when the build
// set it (-ldflags "-X main.version=v1.2.3"); else the module version that
// `go install module@version` recorded; else "devel". timerctl and
// timerworker both use it, so that one build reports one version.
func BuildVersion(set string) string {
	if set != "" {
		return set
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "devel"
}

// VersionLine is the one line both binaries print for their version, by
// the version command and by --version alike: "<binary> <version> (<Go
// version>)", e.g. "timerctl v1.2.3 (go1.26.0)".
func VersionLine(binary, version string) string {
	return fmt.Sprintf("%s %s (%s)", binary, version, runtime.Version())
}

func init() {
	// urfave/cli's own --version prints "<name> version <v>"; both apps
	// print VersionLine instead. Set once here, as the printer is a
	// package variable of urfave/cli shared by every app in the process.
	cli.VersionPrinter = func(c *cli.Context) {
		fmt.Fprintln(c.App.Writer, VersionLine(c.App.Name, c.App.Version))
	}
}
