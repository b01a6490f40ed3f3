package examples_test

// The examples are documentation that must keep working: each is built,
// run to completion and its output checked, on the in-memory Redis it
// starts itself and on a throwaway redis-server (internal/redistest), with
// a timerworker process firing the timers as in production.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/internal/testbin"
	"github.com/timerq/timerq/queue"
)

// binDir holds the example binaries and timerworker, built by TestMain;
// empty with -short.
var binDir string

// binary returns the path of the built program name, skipping the test in
// the fast loop (-short), which builds no binaries.
func binary(t testing.TB, name string) string {
	t.Helper()
	if binDir == "" {
		t.Skip("-short builds no example binaries; drop -short to run this test")
	}
	return filepath.Join(binDir, name)
}

func TestMain(m *testing.M) {
	pkgs := []string{"../cmd/timerworker"}
	for _, ex := range examples {
		pkgs = append(pkgs, "./"+ex.name)
	}
	// With -race when the test has it: the examples run under the race
	// detector too.
	testbin.Main(m, testbin.Race, func(dir string) { binDir = dir }, pkgs...)
}

// example is one example program. Its namespace is its name.
type example struct {
	name string
	args []string
	// want are patterns the output must match.
	want []string
	// worker: on a real Redis the example relies on timerworker.
	worker bool
}

var examples = []example{
	{name: "quickstart", args: []string{"-delay", "500ms"}, worker: true,
		want: []string{`scheduled quickstart-\w+, due`, `fired [0-9.]+[µm]?s after its due time \(Redis clock\)`}},
	{name: "durable-sleep", args: []string{"-delay", "500ms"}, worker: true,
		want: []string{
			`run 1: crashed mid-sleep`,
			`worker: fired [0-9a-f-]{36} while no workflow was running`,
			`run 2: step 0: replayed: the timer had fired at .*, so SleepUntil returned at once`,
			`run 2: execution order-\w+ done`,
		}},
	{name: "consumer", args: []string{"-delay", "500ms"}, worker: true,
		want: []string{
			`attempt 1: failing before the acknowledgement`,
			`attempt [2-9]: deadline of order \w+-1 fired .*: a redelivery, already handled`,
			`order \w+-1: expired`, `order \w+-2: paid`, `order \w+-3: expired`,
		}},
	{name: "embedded-poller", args: []string{"-delay", "500ms"},
		want: []string{`all 5 timers fired; this process fired 5 \(timerq_timers_fired_total\)`}},
	{name: "reminders", args: []string{"-delay", "500ms"}, worker: true,
		want: []string{`msg=REMINDER id=\w+ text="stretch your legs"`, `fired at .*; self-test passed`}},
}

func TestExamples(t *testing.T) {
	for _, ex := range examples {
		t.Run(ex.name, func(t *testing.T) {
			t.Parallel()
			t.Run("mini", func(t *testing.T) {
				out := runExample(t, ex.name, "", ex.args...)
				checkOutput(t, out, ex.want...)
			})
			if ex.name == "durable-sleep" {
				// Its in-process crash is for the in-memory Redis only;
				// TestDurableSleepSurvivesKill crashes it for real.
				return
			}
			t.Run("real", func(t *testing.T) {
				srv := redistest.Start(t, redistest.Config{})
				if ex.worker {
					startWorker(t, srv.URL(), ex.name)
				}
				out := runExample(t, ex.name, srv.URL(), ex.args...)
				checkOutput(t, out, ex.want...)
				checkOutput(t, out, `using Redis at `+regexp.QuoteMeta(srv.Addr()))
			})
		})
	}
}

// TestInProcessPoller runs the examples with -poller on a real Redis with
// no timerworker: they must fire their own timers.
func TestInProcessPoller(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t, redistest.Config{})
	for _, ex := range examples {
		if !ex.worker || ex.name == "durable-sleep" {
			continue
		}
		out := runExample(t, ex.name, srv.URL(), append([]string{"-poller"}, ex.args...)...)
		checkOutput(t, out, ex.want...)
	}
}

// TestDurableSleepSurvivesKill kills the workflow with SIGKILL mid-sleep,
// lets timerworker fire its timer while it is dead, and runs it again: the
// replay must find the timer fired and return at once, even though it asks
// for a one-hour sleep.
func TestDurableSleepSurvivesKill(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t, redistest.Config{})
	startWorker(t, srv.URL(), "durable-sleep")
	const execID = "order-kill9"

	cmd := exec.Command(binary(t, "durable-sleep"), "-exec", execID, "-delay", "1500ms")
	cmd.Env = env(srv.URL())
	var out redistest.SyncBuffer
	lines := pipeLines(t, cmd, &out)
	waitLine(t, lines, "step 0: SleepUntil(now+1.5s)", &out)
	// Kill it mid-sleep: once its timer exists, before it is due.
	q, err := queue.New(srv.Client(t), queue.Options{Namespace: "durable-sleep"})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	id := queue.DeriveID(execID, 0)
	redistest.Eventually(t, 15*time.Second, "the workflow's timer", func() bool {
		timer, err := q.Get(ctx, id)
		if err == nil {
			if timer.State != queue.StateScheduled {
				t.Fatalf("the timer is %s already; the machine is too slow for this test", timer.State)
			}
			return true
		}
		if !errors.Is(err, queue.ErrNotFound) {
			t.Fatal(err)
		}
		return false
	})
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for range lines { // drained: the process is gone
	}
	err = cmd.Wait()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("run 1 should have died of SIGKILL, got %v\n%s", err, out.String())
	}
	if strings.Contains(out.String(), "done") {
		t.Fatalf("run 1 finished before it was killed:\n%s", out.String())
	}

	// The timer fires with no workflow process alive.
	if err := q.Wait(ctx, id); err != nil {
		t.Fatalf("the timer did not fire while the workflow was dead: %v", err)
	}

	start := time.Now()
	out2 := runExample(t, "durable-sleep", srv.URL(), "-exec", execID, "-delay", "1h")
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("the replay took %v; it should return at once", d)
	}
	checkOutput(t, out2,
		`step 0: replayed: the timer had fired at .*, so SleepUntil returned at once`,
		`step 1: sending the payment reminder for order-kill9`,
		`execution order-kill9 done`)
}

// TestRemindersServer runs reminders as a server, as its documentation
// says, and uses its API.
func TestRemindersServer(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(binary(t, "reminders"), "-addr", "127.0.0.1:0")
	cmd.Env = env("")
	var out redistest.SyncBuffer
	lines := pipeLines(t, cmd, &out)
	line := waitLine(t, lines, "listening on http://", &out)
	base := line[strings.Index(line, "http://"):strings.LastIndexByte(line, '"')]
	drained := make(chan struct{})
	go func() { // keep the pipe drained
		defer close(drained)
		for range lines {
		}
	}()

	do := func(method, path, body string, want int) map[string]any {
		t.Helper()
		req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != want {
			t.Fatalf("%s %s %s: %d %s, want %d", method, path, body, resp.StatusCode, b, want)
		}
		var v map[string]any
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatalf("%s %s: %v: %s", method, path, err, b)
		}
		return v
	}
	do("POST", "/reminders", `{"id":"tea","in":"300ms","text":"tea is ready"}`, http.StatusCreated)
	do("POST", "/reminders", `{"id":"tea","in":"1h","text":"tea is ready"}`, http.StatusOK)
	do("POST", "/reminders", `{"id":"tea","in":"1s","text":"coffee"}`, http.StatusConflict)
	do("POST", "/reminders", `{"at":"2030-01-02T09:00:00Z","text":"later"}`, http.StatusCreated)
	do("POST", "/reminders", `{"in":"1s","at":"2030-01-02T09:00:00Z"}`, http.StatusBadRequest)
	do("POST", "/reminders", `{"in":"soon"}`, http.StatusBadRequest)
	do("POST", "/reminders", `{"in":"1s","when":"x"}`, http.StatusBadRequest)
	do("GET", "/reminders/nope", "", http.StatusNotFound)
	redistest.Eventually(t, 10*time.Second, "reminder tea to fire", func() bool {
		return do("GET", "/reminders/tea", "", http.StatusOK)["state"] == "fired"
	})
	// Fired is not delivered: the consumer leases the fire after the
	// claim made it visible (Consume runs on Lease), and a SIGTERM before
	// that leaves it pending for the next run. Wait for the delivery.
	reminded := regexp.MustCompile(`msg=REMINDER id=tea text="tea is ready"`)
	redistest.Eventually(t, 10*time.Second, "reminder tea to be delivered", func() bool {
		return reminded.MatchString(out.String())
	})

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	<-drained
	if err != nil {
		t.Fatalf("reminders exited with %v on SIGTERM\n%s", err, out.String())
	}
	checkOutput(t, out.String(), `msg=REMINDER id=tea text="tea is ready"`, `msg="shutting down"`)
}

// env is the examples' environment: TIMERQ_REDIS_URL is url, or unset for
// the in-memory Redis whatever the caller's environment says.
func env(url string) []string {
	var e []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "TIMERQ_REDIS_URL=") {
			e = append(e, kv)
		}
	}
	if url != "" {
		e = append(e, "TIMERQ_REDIS_URL="+url)
	}
	// A race-enabled binary sleeps 1 s at exit by default, to let racing
	// goroutines report; the examples stop theirs before exiting. A race
	// still fails the run: it exits with status 66.
	return append(e, "GORACE=atexit_sleep_ms=50")
}

// runExample runs an example to completion and returns its output; it
// fails the test unless the example exits 0 within 30 s.
func runExample(t *testing.T, name, url string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary(t, name), args...)
	cmd.Env = env(url)
	cmd.WaitDelay = time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

func checkOutput(t *testing.T, out string, patterns ...string) {
	t.Helper()
	for _, p := range patterns {
		if !regexp.MustCompile(p).MatchString(out) {
			t.Errorf("output lacks %q:\n%s", p, out)
		}
	}
}

// startWorker runs timerworker on namespace ns until the test ends.
func startWorker(t *testing.T, url, ns string) {
	t.Helper()
	cmd := exec.Command(binary(t, "timerworker"), "--redis", url, "--namespace", ns)
	cmd.Env = env("")
	var log redistest.SyncBuffer
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		if err := cmd.Wait(); err != nil || t.Failed() {
			t.Logf("timerworker: %v\n%s", err, log.String())
		}
	})
}

// pipeLines starts cmd and returns its output lines (stdout and stderr),
// also copied to out; the channel closes once the process has exited and
// every line was received. The caller calls cmd.Wait.
func pipeLines(t *testing.T, cmd *exec.Cmd, out *redistest.SyncBuffer) <-chan string {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = w, w
	err = cmd.Start()
	w.Close() // the child has its own copy: EOF comes when it exits
	if err != nil {
		r.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil { // the test failed before its Wait
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	lines := make(chan string)
	go func() {
		defer close(lines)
		defer r.Close()
		s := bufio.NewScanner(r)
		for s.Scan() {
			out.Write([]byte(s.Text() + "\n"))
			lines <- s.Text()
		}
	}()
	return lines
}

// waitLine returns the first line containing s, failing after 15 s.
func waitLine(t *testing.T, lines <-chan string, s string, out *redistest.SyncBuffer) string {
	t.Helper()
	timeout := time.After(15 * time.Second)
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("output ended without %q:\n%s", s, out.String())
			}
			if strings.Contains(l, s) {
				return l
			}
		case <-timeout:
			t.Fatalf("no %q within 15 s:\n%s", s, out.String())
		}
	}
}
