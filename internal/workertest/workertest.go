// Package workertest runs a real timerworker serving the HTTP API for the
// tests of HTTP clients: examples/http's curl walkthrough and docs tests,
// and the client packages under clients/. It is a test kit: only tests
// import it.
//
// A test package runs its tests through Main, which builds timerworker
// once (not under -short), stops the shared Redis servers and checks for
// leaked goroutines. ForEachBackend gives a test a standalone Redis, a
// 16-shard namespace of the shared 3-master Cluster and, if asked, a
// master found through a Sentinel; StartWorker starts timerworker on one
// with a token that may do everything on its namespace.
//
// The client tools (node, npm, python3, curl, bash) are found on PATH by
// RequireTool: without one a test skips, unless TIMERQ_REQUIRE_NODE=1 (as
// CI sets it), when it fails.
package workertest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/timerq/timerq/api/apitoken"
	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/internal/testbin"
	"github.com/timerq/timerq/queue"
)

// RequireEnv makes a missing client tool (node, npm, python3, curl, bash)
// fail the test instead of skipping it, as CI sets it.
const RequireEnv = "TIMERQ_REQUIRE_NODE"

// workerBin is timerworker, built by Main; empty under -short.
var workerBin string

// Main runs a test package's tests: it builds timerworker (unless
// -short: then every test that needs it or a client tool skips), runs the
// tests through redistest.Shared, removes the build and checks for leaked
// goroutines. Call it from TestMain.
func Main(m *testing.M) {
	testbin.Main(redistest.Shared(m), false, func(dir string) { workerBin = filepath.Join(dir, "timerworker") },
		"github.com/timerq/timerq/cmd/timerworker")
}

// RequireTool returns the path of a client tool, skipping the test
// under -short, and without the tool unless TIMERQ_REQUIRE_NODE=1.
func RequireTool(t *testing.T, name string) string {
	t.Helper()
	if testing.Short() {
		t.Skipf("-short runs no client tool (%s) and builds no timerworker; drop -short to run this test", name)
	}
	p, err := exec.LookPath(name)
	if err == nil {
		return p
	}
	if os.Getenv(RequireEnv) == "1" {
		t.Fatalf("%s is not on PATH and %s=1: install it (Node 20+ with npm, python3, curl, bash) or unset %s", name, RequireEnv, RequireEnv)
	}
	t.Skipf("%s is not on PATH (set %s=1 to fail instead)", name, RequireEnv)
	return ""
}

// Backend is a Redis for a worker to serve: a URL and a namespace of the
// test's own, created with its shard count.
type Backend struct {
	Name   string
	URL    string
	NS     string
	Shards int
}

// ForEachBackend runs fn on a standalone redis-server with a one-shard
// namespace, on a 16-shard namespace of the shared 3-master Cluster, and,
// with sentinel, on a master found through a Sentinel.
func ForEachBackend(t *testing.T, sentinel bool, fn func(t *testing.T, b Backend)) {
	t.Run("standalone", func(t *testing.T) {
		redistest.Require(t)
		s := redistest.Start(t, redistest.Config{})
		b := Backend{Name: "standalone", URL: s.URL(), NS: redistest.Namespace(t), Shards: 1}
		CreateNamespace(t, s.Client(t), b)
		fn(t, b)
	})
	if sentinel {
		t.Run("sentinel", func(t *testing.T) {
			redistest.Require(t)
			master := redistest.Start(t, redistest.Config{})
			_, port, err := net.SplitHostPort(master.Addr())
			if err != nil {
				t.Fatal(err)
			}
			sen := redistest.Start(t, redistest.Config{Sentinel: true})
			if err := sen.Client(t).Do(context.Background(), "SENTINEL", "MONITOR", "m", "127.0.0.1", port, 1).Err(); err != nil {
				t.Fatalf("SENTINEL MONITOR: %v", err)
			}
			b := Backend{Name: "sentinel", URL: "redis://" + sen.Addr() + "/0?master_name=m", NS: redistest.Namespace(t), Shards: 1}
			CreateNamespace(t, master.Client(t), b)
			fn(t, b)
		})
	}
	t.Run("cluster16", func(t *testing.T) {
		redistest.Require(t)
		c := redistest.SharedCluster(t)
		b := Backend{Name: "cluster16", URL: c.URL(), NS: redistest.Namespace(t), Shards: 16}
		CreateNamespace(t, c.Client(t), b)
		fn(t, b)
	})
}

// CreateNamespace creates b.NS with its shards before a worker starts, so
// the worker and the API read the count from the start.
func CreateNamespace(t *testing.T, rdb redis.UniversalClient, b Backend) {
	t.Helper()
	if _, err := queue.CreateNamespace(context.Background(), rdb, b.NS, b.Shards); err != nil {
		t.Fatal(err)
	}
}

// API is a timerworker serving the HTTP API for one namespace.
type API struct {
	URL   string // base URL, http://127.0.0.1:port
	Token string // read, write and admin on NS; empty from Serve
	NS    string
	Log   *redistest.SyncBuffer // the worker's output
}

var listening = regexp.MustCompile(`msg="timerq: serving the HTTP API" url=(\S+)`)

// StartWorker starts timerworker on b with --api-addr on a free loopback
// port and a tokens file whose one token may do everything on b.NS, and
// waits until it serves the API and claims its shards.
func StartWorker(t *testing.T, b Backend) *API {
	t.Helper()
	token, line, err := apitoken.Mint("examples", []string{b.NS}, []apitoken.Right{apitoken.Read, apitoken.Write, apitoken.Admin})
	if err != nil {
		t.Fatal(err)
	}
	a := Serve(t, b, line.Line())
	a.Token = token
	return a
}

// Serve starts timerworker on b with --api-addr on a free loopback port
// and a tokens file of the lines given (none: no tokens file, so that the
// loopback API serves every request), and waits until it serves the API
// and claims its shards. The worker is killed when the test ends.
func Serve(t *testing.T, b Backend, tokenLines ...string) *API {
	t.Helper()
	if workerBin == "" {
		t.Fatal("workertest: no timerworker: run the package's tests through workertest.Main, without -short (RequireTool skips under -short)")
	}
	args := []string{"--redis", b.URL, "--namespace", b.NS, "--max-poll-interval", "200ms", "--api-addr", "127.0.0.1:0"}
	if len(tokenLines) > 0 {
		tokens := filepath.Join(t.TempDir(), "tokens")
		if err := os.WriteFile(tokens, []byte(strings.Join(tokenLines, "\n")+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		args = append(args, "--api-tokens-file", tokens)
	}
	a := &API{NS: b.NS, Log: &redistest.SyncBuffer{}}
	cmd := exec.Command(workerBin, args...)
	cmd.Stdout, cmd.Stderr = a.Log, a.Log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
		if t.Failed() {
			t.Logf("timerworker's log:\n%s", a.Log)
		}
	})
	redistest.Eventually(t, 30*time.Second, "timerworker to serve the API and claim its shards", func() bool {
		select {
		case <-done:
			t.Fatalf("timerworker exited:\n%s", a.Log)
		default:
		}
		m := listening.FindStringSubmatch(a.Log.String())
		if m == nil || !regexp.MustCompile(`claiming shards`).MatchString(a.Log.String()) {
			return false
		}
		a.URL = m[1]
		return true
	})
	return a
}

// Env is the environment the clients' tests read: this environment and
// TIMERQ_API, TIMERQ_TOKEN, TIMERQ_NS and TIMERQ_SHARDS.
func (a *API) Env(b Backend) []string {
	return append(os.Environ(), "TIMERQ_API="+a.URL, "TIMERQ_TOKEN="+a.Token, "TIMERQ_NS="+a.NS,
		"TIMERQ_SHARDS="+strconv.Itoa(b.Shards))
}

// Run runs a command in dir with a deadline and returns its combined
// output, failing the test if it fails.
func Run(t *testing.T, timeout time.Duration, dir string, env []string, name string, args ...string) string {
	t.Helper()
	out, err := RunErr(timeout, dir, env, name, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// RunErr is Run for a caller that is not a test: the error carries the
// command and its output.
func RunErr(timeout time.Duration, dir string, env []string, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir, cmd.Env = dir, env
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %q in %s: %w\n%s", filepath.Base(name), args, dir, err, out)
	}
	return string(out), nil
}
