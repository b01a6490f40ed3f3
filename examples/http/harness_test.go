package httpexamples

import (
	"context"
	"flag"
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
	"go.uber.org/goleak"

	"github.com/timerq/timerq/api/apitoken"
	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/queue"
)

// requireEnv makes a missing client tool (node, npm, python3, curl) fail
// the test instead of skipping it, as CI sets it.
const requireEnv = "TIMERQ_REQUIRE_NODE"

// workerBin is timerworker, built by TestMain; empty under -short.
var workerBin string

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		// The fast loop builds no binaries: every test that runs a
		// worker or a client tool skips (requireTool).
		goleak.VerifyTestMain(m)
		return
	}
	dir, err := os.MkdirTemp("", "timerq-http-examples")
	if err != nil {
		panic(err)
	}
	workerBin = filepath.Join(dir, "timerworker")
	if out, err := exec.Command("go", "build", "-o", workerBin, "../../cmd/timerworker").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build ../../cmd/timerworker: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	goleak.VerifyTestMain(cleanupM{m, dir})
}

// cleanupM runs the tests through redistest.Shared, which stops the shared
// servers, and removes the build directory, before goleak checks.
type cleanupM struct {
	m   *testing.M
	dir string
}

func (c cleanupM) Run() int {
	defer os.RemoveAll(c.dir)
	return redistest.Shared(c.m).Run()
}

// requireTool returns the path of a client tool, skipping the test
// under -short, and without the tool unless TIMERQ_REQUIRE_NODE=1.
func requireTool(t *testing.T, name string) string {
	t.Helper()
	if testing.Short() {
		t.Skipf("-short runs no client tool (%s) and builds no timerworker; drop -short to run this test", name)
	}
	p, err := exec.LookPath(name)
	if err == nil {
		return p
	}
	if os.Getenv(requireEnv) == "1" {
		t.Fatalf("%s is not on PATH and %s=1: install it (Node 20+ with npm, python3, curl) or unset %s", name, requireEnv, requireEnv)
	}
	t.Skipf("%s is not on PATH (set %s=1 to fail instead)", name, requireEnv)
	return ""
}

// backend is a Redis for a worker to serve: a URL and a namespace of the
// test's own, created with its shard count.
type backend struct {
	name   string
	url    string
	ns     string
	shards int
}

// forEachBackend runs fn on a standalone redis-server with a one-shard
// namespace, on a 16-shard namespace of the shared 3-master Cluster, and,
// with sentinel, on a master found through a Sentinel.
func forEachBackend(t *testing.T, sentinel bool, fn func(t *testing.T, b backend)) {
	t.Run("standalone", func(t *testing.T) {
		redistest.Require(t)
		s := redistest.Start(t, redistest.Config{})
		b := backend{name: "standalone", url: s.URL(), ns: redistest.Namespace(t), shards: 1}
		createNamespace(t, s.Client(t), b)
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
			b := backend{name: "sentinel", url: "redis://" + sen.Addr() + "/0?master_name=m", ns: redistest.Namespace(t), shards: 1}
			createNamespace(t, master.Client(t), b)
			fn(t, b)
		})
	}
	t.Run("cluster16", func(t *testing.T) {
		redistest.Require(t)
		c := redistest.SharedCluster(t)
		b := backend{name: "cluster16", url: c.URL(), ns: redistest.Namespace(t), shards: 16}
		createNamespace(t, c.Client(t), b)
		fn(t, b)
	})
}

// createNamespace creates b.ns with its shards before a worker starts, so
// the worker and the API read the count from the start.
func createNamespace(t *testing.T, rdb redis.UniversalClient, b backend) {
	t.Helper()
	if _, err := queue.CreateNamespace(context.Background(), rdb, b.ns, b.shards); err != nil {
		t.Fatal(err)
	}
}

// api is a timerworker serving the HTTP API for one namespace.
type api struct {
	url   string // base URL, http://127.0.0.1:port
	token string // read, write and admin on ns
	ns    string
	log   *redistest.SyncBuffer
}

var listening = regexp.MustCompile(`msg="timerq: serving the HTTP API" url=(\S+)`)

// startWorker starts timerworker on b with --api-addr on a free loopback
// port and a tokens file whose one token may do everything on b.ns, and
// waits until it serves the API and claims its shards.
func startWorker(t *testing.T, b backend) *api {
	t.Helper()
	token, line, err := apitoken.Mint("examples", []string{b.ns}, []apitoken.Right{apitoken.Read, apitoken.Write, apitoken.Admin})
	if err != nil {
		t.Fatal(err)
	}
	a := serve(t, b, line.Line())
	a.token = token
	return a
}

// serve starts timerworker on b with --api-addr on a free loopback port
// and a tokens file of the lines given (none: no tokens file, so that the
// loopback API serves every request), and waits until it serves the API
// and claims its shards.
func serve(t *testing.T, b backend, tokenLines ...string) *api {
	t.Helper()
	args := []string{"--redis", b.url, "--namespace", b.ns, "--max-poll-interval", "200ms", "--api-addr", "127.0.0.1:0"}
	if len(tokenLines) > 0 {
		tokens := filepath.Join(t.TempDir(), "tokens")
		if err := os.WriteFile(tokens, []byte(strings.Join(tokenLines, "\n")+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		args = append(args, "--api-tokens-file", tokens)
	}
	a := &api{ns: b.ns, log: &redistest.SyncBuffer{}}
	cmd := exec.Command(workerBin, args...)
	cmd.Stdout, cmd.Stderr = a.log, a.log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
		if t.Failed() {
			t.Logf("timerworker's log:\n%s", a.log)
		}
	})
	redistest.Eventually(t, 30*time.Second, "timerworker to serve the API and claim its shards", func() bool {
		select {
		case <-done:
			t.Fatalf("timerworker exited:\n%s", a.log)
		default:
		}
		m := listening.FindStringSubmatch(a.log.String())
		if m == nil || !regexp.MustCompile(`claiming shards`).MatchString(a.log.String()) {
			return false
		}
		a.url = m[1]
		return true
	})
	return a
}

// env is the environment the client examples read.
func (a *api) env(b backend) []string {
	return append(os.Environ(), "TIMERQ_API="+a.url, "TIMERQ_TOKEN="+a.token, "TIMERQ_NS="+a.ns,
		"TIMERQ_SHARDS="+strconv.Itoa(b.shards))
}

// run runs a command with a deadline and returns its combined output,
// failing the test if it fails.
func run(t *testing.T, timeout time.Duration, dir string, env []string, name string, args ...string) string {
	t.Helper()
	out, err := runErr(timeout, dir, env, name, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// runErr is run for a caller that is not a test.
func runErr(timeout time.Duration, dir string, env []string, name string, args ...string) (string, error) {
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
