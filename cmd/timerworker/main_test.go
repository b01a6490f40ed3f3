package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/timerq/timerq/cmd/internal/ctl"
	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/internal/testbin"
	"github.com/timerq/timerq/queue"
)

// bin is the timerworker binary, built once by TestMain; empty with -short.
var bin string

// binary returns bin, skipping the test in the fast loop (-short), which
// builds no binaries.
func binary(t testing.TB) string {
	t.Helper()
	if bin == "" {
		t.Skip("-short builds no timerworker binary; drop -short to run this test")
	}
	return bin
}

func TestMain(m *testing.M) {
	flag.Parse()
	// The parallel tests wait on kills, restarts and timers far more than
	// they compute: the 60 s recurring chaos and the rest run side by
	// side rather than two at a time (issue 36).
	redistest.DefaultParallel(6)
	testbin.Main(m, false, func(dir string) { bin = filepath.Join(dir, "timerworker") }, ".")
}

// proc is one timerworker process.
type proc struct {
	t    *testing.T
	cmd  *exec.Cmd
	done chan struct{}
	err  error
	log  string
}

func startWorker(t *testing.T, args ...string) *proc {
	t.Helper()
	return startProc(t, binary(t), args...)
}

// startProc starts the timerworker binary bin (this build's, or another's)
// with args, logging to a file of the test's.
func startProc(t *testing.T, bin string, args ...string) *proc {
	t.Helper()
	logf, err := os.CreateTemp(t.TempDir(), "worker-*.log")
	if err != nil {
		t.Fatal(err)
	}
	p := &proc{t: t, cmd: exec.Command(bin, args...), done: make(chan struct{}), log: logf.Name()}
	p.cmd.Stdout, p.cmd.Stderr = logf, logf
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.err = p.cmd.Wait()
		logf.Close()
		close(p.done)
	}()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.done
	})
	return p
}

// term sends SIGTERM and returns the exit code and how long the exit took.
func (p *proc) term() (int, time.Duration) {
	p.t.Helper()
	began := time.Now()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		p.t.Fatalf("worker did not exit within 10s of SIGTERM; log:\n%s", p.logText())
	}
	return p.cmd.ProcessState.ExitCode(), time.Since(began)
}

func (p *proc) kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

func (p *proc) logText() string {
	b, _ := os.ReadFile(p.log)
	return string(b)
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	redistest.Eventually(t, d, what, cond)
}

// awaitMetrics reads the worker's /metrics at addr until it holds every
// series of want (a series with its value), and returns the text. A timer's
// fire shows in Redis, to Stats and to a waiter, before the worker has the
// claim's reply and counts it, so a test that saw a fire waits for the
// count rather than read it once.
func awaitMetrics(t *testing.T, d time.Duration, addr string, want ...string) string {
	t.Helper()
	var text string
	for end := time.Now().Add(d); ; time.Sleep(20 * time.Millisecond) {
		if resp, err := http.Get("http://" + addr + "/metrics"); err == nil {
			raw, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err == nil {
				text = string(raw)
			}
		}
		missing := slices.DeleteFunc(slices.Clone(want), func(w string) bool { return strings.Contains(text, w) })
		if len(missing) == 0 {
			return text
		}
		if time.Now().After(end) {
			// Say what the metrics held instead: the lines of each
			// missing sample's metric.
			var got []string
			for _, w := range missing {
				name, _, _ := strings.Cut(w, "{")
				name, _, _ = strings.Cut(name, " ")
				for _, line := range strings.Split(text, "\n") {
					if strings.HasPrefix(line, name) {
						got = append(got, line)
					}
				}
			}
			t.Fatalf("timed out after %v waiting for /metrics to hold %q; it holds %q", d, missing, got)
		}
	}
}

func httpStatus(url string) int {
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// fireCounts counts fire stream entries per timer ID, failing on any fired
// before its due time.
func fireCounts(t *testing.T, rdb redis.UniversalClient, q *queue.Queue) map[string]int {
	t.Helper()
	counts := map[string]int{}
	shards, err := q.Inspect().Shards(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for k := range shards {
		countStream(t, rdb, q.Keys().Stream(k), counts)
	}
	return counts
}

func countStream(t *testing.T, rdb redis.UniversalClient, stream string, counts map[string]int) {
	t.Helper()
	start := "-"
	for {
		msgs, err := rdb.XRangeN(context.Background(), stream, start, "+", 5000).Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range msgs {
			id, _ := m.Values["id"].(string)
			due, _ := strconv.ParseInt(m.Values["due"].(string), 10, 64)
			fired, _ := strconv.ParseInt(m.Values["fired"].(string), 10, 64)
			if fired < due {
				t.Errorf("timer %s fired at %d, %d ms before its due time", id, fired, due-fired)
			}
			counts[id]++
		}
		if len(msgs) < 5000 {
			return
		}
		start = "(" + msgs[len(msgs)-1].ID
	}
}

// TestWorkerExactlyOnceUnderKills: 4 replicas, 20,000 timers due over 5 s, a
// random replica SIGKILLed and restarted each time another 5-15% of them
// fired. Every timer fires exactly once and none early.
func TestWorkerExactlyOnceUnderKills(t *testing.T) {
	t.Parallel() // servers of its own; see docs/development.md, "Loops"
	srv := redistest.Start(t, redistest.Config{})
	rdb := srv.Client(t)
	ns := redistest.Namespace(t)
	q, err := queue.New(rdb, queue.Options{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	const n = 20000
	base := time.Now().Add(500 * time.Millisecond)
	batch := make([]queue.NewTimer, n)
	for i := range batch {
		batch[i] = queue.NewTimer{ID: fmt.Sprint("t", i), Due: base.Add(time.Duration(i) * 5 * time.Second / n)}
	}
	if _, err := q.ScheduleBatch(context.Background(), batch); err != nil {
		t.Fatal(err)
	}
	args := []string{"--redis", srv.URL(), "--namespace", ns}
	workers := make([]*proc, 4)
	for i := range workers {
		workers[i] = startWorker(t, args...)
	}
	// Kill a random worker each time another tenth or so of the timers
	// has fired: the kills land throughout the firing, whatever the load.
	kills := 0
	fired := func() int64 {
		s, err := q.Stats(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return s.Fired
	}
	for next := int64(n/20 + rand.IntN(n/10)); next < n*9/10; next += int64(n/20 + rand.IntN(n/10)) {
		waitFor(t, 20*time.Second, fmt.Sprintf("%d timers to fire", next), func() bool { return fired() >= next })
		i := rand.IntN(len(workers))
		workers[i].kill()
		kills++
		workers[i] = startWorker(t, args...)
	}
	waitFor(t, 10*time.Second, "every timer to fire", func() bool {
		s, err := q.Stats(context.Background())
		return err == nil && s.Scheduled == 0
	})
	for i, w := range workers {
		// A SIGTERM before the signal handler is installed kills outright.
		waitFor(t, 5*time.Second, "the worker to start", func() bool { return strings.Contains(w.logText(), "worker started") })
		if code, took := w.term(); code != 0 || took > 5*time.Second {
			t.Errorf("worker %d: exit %d after %v on SIGTERM, want 0 within 5s; log:\n%s", i, code, took, w.logText())
		}
	}
	counts := fireCounts(t, rdb, q)
	missing, dup := 0, 0
	for _, tm := range batch {
		switch c := counts[tm.ID]; {
		case c == 0:
			missing++
		case c > 1:
			dup++
		}
	}
	t.Logf("%d kills; %d fire entries for %d timers", kills, len(counts), n)
	if missing != 0 || dup != 0 || len(counts) != n {
		t.Fatalf("%d timers never fired, %d fired more than once, %d distinct IDs in the stream (want %d)", missing, dup, len(counts), n)
	}
}

// TestWorkerSurvivesRedisOutage: Redis (appendonly) stops for a few seconds
// and restarts on the same data; the worker stays up, /readyz follows the
// outage, and the timers that came due meanwhile fire afterwards.
func TestWorkerSurvivesRedisOutage(t *testing.T) {
	t.Parallel() // servers of its own; see docs/development.md, "Loops"
	srv := redistest.Start(t, redistest.Config{Args: []string{"--appendonly", "yes", "--appendfsync", "always"}})
	rdb := srv.Client(t)
	ns := redistest.Namespace(t)
	q, err := queue.New(rdb, queue.Options{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	metrics := freeAddr(t)
	w := startWorker(t, "--redis", srv.URL(), "--namespace", ns, "--metrics-addr", metrics)
	ready := "http://" + metrics + "/readyz"
	waitFor(t, 5*time.Second, "/readyz 200", func() bool { return httpStatus(ready) == 200 })
	if got := httpStatus("http://" + metrics + "/healthz"); got != 200 {
		t.Errorf("/healthz = %d", got)
	}

	var batch []queue.NewTimer
	due := time.Now().Add(time.Second)
	for i := range 500 {
		batch = append(batch, queue.NewTimer{ID: fmt.Sprint("o", i), Due: due})
	}
	if _, err := q.ScheduleBatch(context.Background(), batch); err != nil {
		t.Fatal(err)
	}
	srv.Stop()
	waitFor(t, 5*time.Second, "/readyz 503 during the outage", func() bool { return httpStatus(ready) == 503 })
	if got := httpStatus("http://" + metrics + "/healthz"); got != 200 {
		t.Errorf("/healthz = %d during the outage, want 200", got)
	}
	// A real sleep: an outage lasts wall time, and the timers must come due
	// during it (Redis is down, so its clock cannot be asked or moved).
	time.Sleep(time.Until(due))
	// And the worker has noticed: a claim failed (it retries, with backoff).
	waitFor(t, 10*time.Second, "a failed claim during the outage", func() bool {
		return w.exited() || strings.Contains(w.logText(), "shard paused: cannot connect to the Redis node")
	})
	if w.exited() {
		t.Fatalf("worker exited during the outage; log:\n%s", w.logText())
	}
	srv.Restart()
	waitFor(t, 10*time.Second, "/readyz 200 after the outage", func() bool { return httpStatus(ready) == 200 })
	waitFor(t, 5*time.Second, "the backlog to fire", func() bool {
		s, err := q.Stats(context.Background())
		return err == nil && s.Scheduled == 0
	})
	counts := fireCounts(t, rdb, q)
	if len(counts) != len(batch) {
		t.Errorf("%d timers fired, want %d", len(counts), len(batch))
	}
	nsl := `{namespace="` + ns + `"}`
	// The worker counts the last claim once its reply arrives, after Stats
	// saw the timers fire.
	text := awaitMetrics(t, 30*time.Second, metrics, "timerq_timers_fired_total"+nsl+" 500")
	for _, want := range []string{"timerq_timers_fired_total" + nsl + " 500", "timerq_namespace_timers_fired_total" + nsl + " 500",
		"timerq_namespace_fire_lateness_seconds_count" + nsl + " 500", "timerq_claim_errors_total", "timerq_fire_lateness_seconds_bucket",
		"timerq_claim_batch_size_bucket", "timerq_redis_pool_conns ", "timerq_timers_scheduled" + nsl + " 0",
		"timerq_timers_overdue" + nsl + " 0", "timerq_backlog_scrape_success" + nsl + " 1", "timerq_build_info{goversion="} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	// The pool is the process's, not a namespace's: one series, unlabelled.
	if strings.Contains(text, "timerq_redis_pool_conns{") {
		t.Error("timerq_redis_pool_conns carries labels; the pool is one per process")
	}
	if strings.Contains(text, "timerq_claim_errors_total"+nsl+" 0\n") {
		t.Error("timerq_claim_errors_total is 0 after an outage")
	}
	logs := w.logText()
	if n := strings.Count(logs, "shard paused: cannot connect to the Redis node"); n < 1 || n > 30 {
		t.Errorf("%d 'shard paused: cannot connect' lines for the outage, want a few (one per backoff step); log:\n%s", n, logs)
	}
	if code, took := w.term(); code != 0 || took > 5*time.Second {
		t.Errorf("exit %d after %v on SIGTERM, want 0 within 5s", code, took)
	}
}

// TestWorkerStartupErrors: each mistake gives one line naming the problem
// and the fix, a non-zero exit, and never the password.
func TestWorkerStartupErrors(t *testing.T) {
	// Set after start: redistest's readiness PING has no password.
	srv := redistest.Start(t, redistest.Config{})
	if err := srv.Client(t).ConfigSet(context.Background(), "requirepass", "right-pw").Err(); err != nil {
		t.Fatal(err)
	}
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	for _, tc := range []struct {
		name string
		args []string
		want string
		code int // 2: usage; 1: runtime
	}{
		{"URL without scheme", []string{"--redis", "127.0.0.1:6379"}, "--redis 127.0.0.1:6379 has no scheme: add redis:// (rediss:// for TLS): --redis redis://127.0.0.1:6379", 2},
		{"malformed URL", []string{"--redis", "redis://[::1"}, "is not a URL", 2},
		{"repeated flag", []string{"--redis", "redis://:s3cret-pw@a:1/0", "--batch-size", "10", "--redis", "redis://b:1/0"}, "--redis is given more than once: give it once", 2},
		{"repeated flag with =", []string{"--batch-size=10", "--batch-size", "20"}, "--batch-size is given more than once", 2},
		{"unknown URL option", []string{"--redis", "redis://:s3cret-pw@" + srv.Addr() + "/0?bogus=1"}, "unexpected option", 2},
		{"unreachable", []string{"--redis", "redis://:s3cret-pw@" + freeAddr(t) + "/0"}, "cannot reach Redis", 1},
		{"wrong password", []string{"--redis", "redis://:s3cret-pw@" + srv.Addr() + "/0"}, "rejected the username or password", 1},
		{"no password", []string{"--redis", "redis://" + srv.Addr() + "/0"}, "requires a password", 1},
		{"bad flag", []string{"--bogus"}, "flag provided but not defined", 2},
		{"argument", []string{"serve"}, `unexpected argument "serve"`, 2},
		{"bad log level", []string{"--log-level", "loud"}, "--log-level", 2},
		{"batch size too big", []string{"--redis", "redis://:right-pw@" + srv.Addr() + "/0", "--batch-size", "5000"}, "--batch-size 5000 is outside 1-1000", 2},
		{"batch size zero", []string{"--redis", "redis://:right-pw@" + srv.Addr() + "/0", "--batch-size", "0"}, "--batch-size 0 is outside 1-1000", 2},
		{"duration without unit", []string{"--max-poll-interval", "5"}, `--max-poll-interval "5" is not a duration: give it a unit, e.g. --max-poll-interval 5s`, 2},
		{"retention without unit", []string{"--retention", "7"}, `--retention "7" is not a duration`, 2},
		{"bad namespace", []string{"--namespace", "ok,bad ns"}, `--namespace (TIMERQ_NAMESPACE) "bad ns" has ' '`, 2},
		{"repeated namespace", []string{"--namespace", "a", "--namespace", "a"}, `--namespace names "a" twice`, 2},
		{"tls flag without rediss", []string{"--tls-ca-file", "ca.pem"}, "does not use TLS: use the rediss:// scheme", 2},
		{"dev port taken", []string{"--dev", "--dev-addr", taken.Addr().String()}, "timerctl --redis redis://127.0.0.1:6390/0", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(binary(t), tc.args...)
			out, _ := cmd.CombinedOutput()
			if code := cmd.ProcessState.ExitCode(); code != tc.code {
				t.Errorf("exit %d, want %d; output:\n%s", code, tc.code, out)
			}
			lines := strings.Split(strings.TrimSpace(string(out)), "\n")
			if len(lines) != 1 || !strings.HasPrefix(lines[0], "timerworker: ") || !strings.Contains(lines[0], tc.want) {
				t.Errorf("output %q, want one line 'timerworker: ...' mentioning %q", out, tc.want)
			}
			if strings.Count(lines[0], ": ") < 2 {
				t.Errorf("%q does not say what to do", lines[0])
			}
			if strings.Contains(string(out), "s3cret-pw") || strings.Contains(string(out), "right-pw") {
				t.Errorf("output leaks the password: %q", out)
			}
		})
	}
}

// TestWorkerDevMode: --dev serves an embedded Redis, fires a timer scheduled
// through it, and exits 0 on SIGTERM.
func TestWorkerDevMode(t *testing.T) {
	addr := freeAddr(t)
	w := startWorker(t, "--dev", "--dev-addr", addr)
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	waitFor(t, 5*time.Second, "the dev Redis", func() bool { return rdb.Ping(context.Background()).Err() == nil })
	q, err := queue.New(rdb, queue.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := q.SleepUntil(ctx, "dev", time.Now().Add(100*time.Millisecond), nil); err != nil {
		t.Fatalf("timer did not fire in dev mode: %v; log:\n%s", err, w.logText())
	}
	if code, took := w.term(); code != 0 || took > 5*time.Second {
		t.Errorf("exit %d after %v on SIGTERM", code, took)
	}
	logs := w.logText()
	if !strings.Contains(logs, "nothing persists") || !strings.Contains(logs, "redis://"+addr) {
		t.Errorf("dev mode log lacks the URL or the warning:\n%s", logs)
	}

	// Without --dev-addr it listens where TIMERQ_REDIS_URL points, so one
	// variable serves both binaries (the README's walkthrough when 6379
	// is taken).
	addr = freeAddr(t)
	t.Setenv("TIMERQ_REDIS_URL", "redis://"+addr+"/0")
	w = startWorker(t, "--dev")
	var out strings.Builder
	waitFor(t, 5*time.Second, "timerctl to reach the dev Redis", func() bool {
		out.Reset()
		return ctl.Run(context.Background(), []string{"timerctl", "stats"}, ctl.Options{Stdout: &out, Stderr: &out}) == 0
	})
	if code, _ := w.term(); code != 0 {
		t.Errorf("exit %d", code)
	}
}

// TestWorkerHelpAndEnvironment: --help states the exit codes and the TLS
// flags, and a bad TIMERQ_* value is a usage error (2) naming variable,
// flag and an example.
func TestWorkerHelpAndEnvironment(t *testing.T) {
	out, err := exec.Command(binary(t), "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("--help: %v", err)
	}
	// The format of timerctl's (cliconf.VersionLine); this build sets none.
	if v, err := exec.Command(binary(t), "--version").Output(); err != nil || string(v) != "timerworker devel ("+runtime.Version()+")\n" {
		t.Errorf("--version: %v %q, want timerworker devel (%s)", err, v, runtime.Version())
	}
	if strings.Contains(string(out), "COMMANDS:") {
		t.Errorf("--help lists commands, which timerworker has none of:\n%s", out)
	}
	for _, want := range []string{"Exit codes:", "2  usage error", "1  runtime failure", "--tls-ca-file", "TIMERQ_TLS_CA_FILE",
		"--tls-cert-file", "--tls-key-file", "--tls-server-name", "--tls-insecure-skip-verify", "TIMERQ_NAMESPACE"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("--help lacks %q", want)
		}
	}
	for _, tc := range []struct{ env, want string }{
		{"TIMERQ_MAX_POLL_INTERVAL=5", `TIMERQ_MAX_POLL_INTERVAL (--max-poll-interval) "5" is not a duration: give it a unit, e.g. --max-poll-interval 5s`},
		{"TIMERQ_BATCH_SIZE=0", "--batch-size 0 is outside 1-1000"},
		{"TIMERQ_BATCH_SIZE=lots", `TIMERQ_BATCH_SIZE (--batch-size) "lots" is not a whole number`},
	} {
		cmd := exec.Command(binary(t))
		cmd.Env = append(os.Environ(), tc.env)
		out, _ := cmd.CombinedOutput()
		if code := cmd.ProcessState.ExitCode(); code != 2 || !strings.Contains(string(out), tc.want) {
			t.Errorf("%s: exit %d %q, want 2 and %q", tc.env, code, out, tc.want)
		}
	}
}

// TestWorkerServesSeveralNamespaces: one process fires the timers of each
// namespace it is given (by a list and by a repeated flag), reports each in
// /metrics with a namespace label, and is ready only while every one claims.
func TestWorkerServesSeveralNamespaces(t *testing.T) {
	srv := redistest.Start(t, redistest.Config{})
	rdb := srv.Client(t)
	a, b, c := redistest.Namespace(t)+"a", redistest.Namespace(t)+"b", redistest.Namespace(t)+"c"
	metrics := freeAddr(t)
	w := startWorker(t, "--redis", srv.URL(), "--namespace", a+","+b, "--namespace", c, "--metrics-addr", metrics)
	waitFor(t, 5*time.Second, "/readyz 200", func() bool { return httpStatus("http://"+metrics+"/readyz") == 200 })
	for _, ns := range []string{a, b, c} {
		q, err := queue.New(rdb, queue.Options{Namespace: ns})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := q.SleepUntil(ctx, "t-"+ns, time.Now().Add(50*time.Millisecond), nil); err != nil {
			t.Errorf("namespace %s: the timer did not fire: %v", ns, err)
		}
		cancel()
		q.Close()
	}
	var want []string
	for _, ns := range []string{a, b, c} {
		want = append(want, `timerq_timers_fired_total{namespace="`+ns+`"} 1`)
	}
	awaitMetrics(t, 10*time.Second, metrics, want...)
	// Connections are shared: one pool, plus one pub/sub connection per
	// namespace, not a client per namespace.
	info, err := rdb.ClientList(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	// (20: each namespace's start-up reads its layout, claims, takes the
	// maintenance lock and reads its due horizon at once, which can leave a
	// few more idle pooled connections; a client per namespace would be
	// several times that.)
	if n := strings.Count(info, "\n"); n > 20 {
		t.Errorf("%d client connections for 3 namespaces, want a shared pool:\n%s", n, info)
	}
	logs := w.logText()
	if !strings.Contains(logs, "namespaces="+a+","+b+","+c) {
		t.Errorf("start-up log does not list the namespaces:\n%s", logs)
	}
	if code, _ := w.term(); code != 0 {
		t.Errorf("exit %d on SIGTERM", code)
	}
}

// TestWorkerAndTimerctlOverMutualTLS: both binaries take the same TLS
// settings from the same TIMERQ_TLS_* variables, against a TLS-only
// server that requires client certificates: timerctl schedules and waits,
// the worker fires.
func TestWorkerAndTimerctlOverMutualTLS(t *testing.T) {
	pki := redistest.NewPKI(t)
	cfg := pki.ServerTLS(true, "127.0.0.1")
	srv := redistest.Start(t, redistest.Config{TLS: cfg})
	ns := redistest.Namespace(t)
	t.Setenv("TIMERQ_REDIS_URL", srv.URL())
	t.Setenv("TIMERQ_NAMESPACE", ns)
	t.Setenv("TIMERQ_TLS_CA_FILE", pki.CAFile)
	t.Setenv("TIMERQ_TLS_CERT_FILE", cfg.ClientCertFile)
	t.Setenv("TIMERQ_TLS_KEY_FILE", cfg.ClientKeyFile)

	metrics := freeAddr(t)
	w := startWorker(t, "--metrics-addr", metrics)
	waitFor(t, 10*time.Second, "/readyz 200 over mTLS", func() bool { return httpStatus("http://"+metrics+"/readyz") == 200 })

	run := func(args ...string) (int, string) {
		var out, errOut strings.Builder
		code := ctl.Run(context.Background(), append([]string{"timerctl"}, args...), ctl.Options{Stdout: &out, Stderr: &errOut})
		return code, out.String() + errOut.String()
	}
	if code, out := run("schedule", "over-tls", "--in", "300ms"); code != 0 {
		t.Fatalf("timerctl schedule over mTLS: exit %d %s", code, out)
	}
	if code, out := run("wait", "over-tls", "--timeout", "10s"); code != 0 || !strings.Contains(out, "fired") {
		t.Fatalf("timerctl wait over mTLS: exit %d %s\nworker log:\n%s", code, out, w.logText())
	}
	if code, _ := w.term(); code != 0 {
		t.Errorf("worker exit %d", code)
	}

	// Without the client certificate, the worker refuses to start and
	// says which flags to pass; so does timerctl.
	cmd := exec.Command(binary(t))
	cmd.Env = append(os.Environ(), "TIMERQ_TLS_CERT_FILE=", "TIMERQ_TLS_KEY_FILE=")
	out, _ := cmd.CombinedOutput()
	if code := cmd.ProcessState.ExitCode(); code != 1 || !strings.Contains(string(out), "--tls-cert-file and --tls-key-file") {
		t.Errorf("worker without a client certificate: exit %d %q", code, out)
	}
	t.Setenv("TIMERQ_TLS_CERT_FILE", "")
	t.Setenv("TIMERQ_TLS_KEY_FILE", "")
	if code, out := run("get", "over-tls"); code != 1 || !strings.Contains(out, "--tls-cert-file and --tls-key-file") {
		t.Errorf("timerctl without a client certificate: exit %d %q", code, out)
	}
	// --tls-insecure-skip-verify is loud.
	cmd = exec.Command(binary(t), "--tls-insecure-skip-verify", "--redis", "rediss://"+freeAddr(t)+"/0")
	out, _ = cmd.CombinedOutput()
	if !strings.Contains(string(out), "INSECURE") {
		t.Errorf("--tls-insecure-skip-verify is not announced: %q", out)
	}
}

// TestWorkerRefusesTooOldRedis: the start-up check reads INFO server and
// stops with exit 1 on a server older than 5.0, naming both versions. The
// "server" is a few lines of RESP that claim to be Redis 4.0.14.
func TestWorkerRefusesTooOldRedis(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go fakeOldRedis(c)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary(t), "--redis", "redis://"+ln.Addr().String()+"/0")
	out, _ := cmd.CombinedOutput()
	if code := cmd.ProcessState.ExitCode(); code != 1 || !strings.Contains(string(out), "is version 4.0.14, too old") ||
		!strings.Contains(string(out), "needs Redis 5.0 or later: upgrade Redis to 5.0") {
		t.Fatalf("exit %d %q, want 1 and a message naming 4.0.14 and 5.0", code, out)
	}
}

// fakeOldRedis answers RESP2 commands as a Redis 4.0.14 would, enough for
// a client's handshake, PING and INFO.
func fakeOldRedis(c net.Conn) {
	defer c.Close()
	r := bufio.NewReader(c)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return
		}
		if !strings.HasPrefix(line, "*") {
			continue
		}
		n, _ := strconv.Atoi(strings.TrimSpace(line[1:]))
		var args []string
		for range n {
			if _, err := r.ReadString('\n'); err != nil { // $len
				return
			}
			a, err := r.ReadString('\n')
			if err != nil {
				return
			}
			args = append(args, strings.ToLower(strings.TrimSpace(a)))
		}
		switch args[0] {
		case "ping":
			fmt.Fprint(c, "+PONG\r\n")
		case "info":
			body := "# Server\r\nredis_version:4.0.14\r\n"
			fmt.Fprintf(c, "$%d\r\n%s\r\n", len(body), body)
		default: // HELLO, CLIENT SETINFO: not in 4.0
			fmt.Fprintf(c, "-ERR unknown command '%s'\r\n", args[0])
		}
	}
}

// TestWorkerRefusesAClusterNodeAsASingleServer: a --redis URL of one
// Cluster node without ?cluster=1 stops at start with that hint, instead
// of retrying MOVED forever.
func TestWorkerRefusesAClusterNodeAsASingleServer(t *testing.T) {
	t.Parallel() // servers of its own; see docs/development.md, "Loops"
	cl := redistest.StartCluster(t, 3, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary(t), "--redis", cl.Nodes[0].URL())
	out, _ := cmd.CombinedOutput()
	if code := cmd.ProcessState.ExitCode(); code != 1 || !strings.Contains(string(out), "add ?cluster=1 to --redis") {
		t.Fatalf("exit %d %q, want 1 and the ?cluster=1 hint", code, out)
	}
	metrics := freeAddr(t)
	w := startWorker(t, "--redis", cl.URL(), "--metrics-addr", metrics)
	waitFor(t, 10*time.Second, "/readyz 200", func() bool { return w.exited() || httpStatus("http://"+metrics+"/readyz") == 200 })
	if w.exited() {
		t.Fatalf("worker with the Cluster URL exited:\n%s", w.logText())
	}
	if code, _ := w.term(); code != 0 {
		t.Errorf("exit %d:\n%s", code, w.logText())
	}
}

// TestPprofOnlyWhenAsked: --pprof serves Go's profiles on --metrics-addr;
// without it they are not there, and --pprof alone is a usage error.
func TestPprofOnlyWhenAsked(t *testing.T) {
	srv := redistest.Start(t, redistest.Config{})
	for _, withPprof := range []bool{false, true} {
		metrics := freeAddr(t)
		args := []string{"--redis", srv.URL(), "--namespace", redistest.Namespace(t), "--metrics-addr", metrics}
		if withPprof {
			args = append(args, "--pprof")
		}
		w := startWorker(t, args...)
		waitFor(t, 10*time.Second, "/healthz 200", func() bool { return w.exited() || httpStatus("http://"+metrics+"/healthz") == 200 })
		want := http.StatusNotFound
		if withPprof {
			want = http.StatusOK
		}
		if got := httpStatus("http://" + metrics + "/debug/pprof/goroutine?debug=1"); got != want {
			t.Errorf("--pprof %v: /debug/pprof/goroutine = %d, want %d; log:\n%s", withPprof, got, want, w.logText())
		}
		w.term()
	}
	w := startWorker(t, "--redis", srv.URL(), "--namespace", redistest.Namespace(t), "--pprof")
	waitFor(t, 10*time.Second, "the worker to refuse --pprof alone", w.exited)
	if code := w.cmd.ProcessState.ExitCode(); code != 2 || !strings.Contains(w.logText(), "--metrics-addr") {
		t.Errorf("--pprof without --metrics-addr: exit %d, want 2 naming --metrics-addr; log:\n%s", code, w.logText())
	}
}
