package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/poller"
	"github.com/timerq/timerq/queue"
)

// bin is the timerctl binary, built once by TestMain; empty with -short.
var bin string

// binary returns bin, skipping the test in the fast loop (-short), which
// builds no binaries.
func binary(t testing.TB) string {
	t.Helper()
	if bin == "" {
		t.Skip("-short builds no timerctl binary; drop -short to run this test")
	}
	return bin
}

func TestMain(m *testing.M) {
	flag.Parse()
	dir, err := os.MkdirTemp("", "timerctl-test")
	if err != nil {
		panic(err)
	}
	if !testing.Short() {
		bin = filepath.Join(dir, "timerctl")
		if out, err := exec.Command("go", "build", "-ldflags", "-X main.version=v9.9.9-test", "-o", bin, ".").CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "go build: %v\n%s", err, out)
			os.Exit(1)
		}
	}
	code := func() int {
		defer os.RemoveAll(dir)
		return m.Run()
	}()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// env is the binary's environment: the test's Redis and namespace come
// from the env vars, as an operator's shell would set them.
type env struct {
	t   *testing.T
	srv *redistest.Server
	ns  string
}

func newEnv(t *testing.T) *env {
	return &env{t: t, srv: redistest.Start(t, redistest.Config{}), ns: redistest.Namespace(t)}
}

func (e *env) cmd(ctx context.Context, stdin string, args ...string) *exec.Cmd {
	c := exec.CommandContext(ctx, binary(e.t), args...)
	c.Env = append(os.Environ(), "TIMERQ_REDIS_URL="+e.srv.URL(), "TIMERQ_NAMESPACE="+e.ns, "TIMERQ_OUTPUT=")
	c.Stdin = strings.NewReader(stdin)
	return c
}

// run runs the binary and returns its exit code and output.
func (e *env) run(args ...string) (int, string, string) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := e.cmd(ctx, "", args...)
	var out, errOut bytes.Buffer
	c.Stdout, c.Stderr = &out, &errOut
	err := c.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		e.t.Fatalf("timerctl %q: %v", args, err)
	}
	return c.ProcessState.ExitCode(), out.String(), errOut.String()
}

func (e *env) expect(code int, args ...string) string {
	e.t.Helper()
	got, out, errOut := e.run(args...)
	if got != code {
		e.t.Fatalf("timerctl %q: exit %d, want %d\nstdout: %s\nstderr: %s", args, got, code, out, errOut)
	}
	if code != 0 && (!strings.HasPrefix(errOut, "timerctl: ") || out != "") {
		e.t.Fatalf("timerctl %q: a failure must print only 'timerctl: …' on stderr; stdout %q stderr %q", args, out, errOut)
	}
	return out + errOut
}

func (e *env) queue() *queue.Queue {
	q, err := queue.New(e.srv.Client(e.t), queue.Options{Namespace: e.ns})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { q.Close() })
	return q
}

// TestEveryCommandAndExitCode runs each command of the binary against a
// real redis-server, reaching each documented exit code.
func TestEveryCommandAndExitCode(t *testing.T) {
	e := newEnv(t)
	q := e.queue()
	ctx := context.Background()

	// 0: schedule, idempotently.
	out := e.expect(0, "schedule", "hello", "--in", "1h", "--payload", "hi")
	if !strings.Contains(out, "result   created") {
		t.Fatalf("schedule:\n%s", out)
	}
	out = e.expect(0, "schedule", "hello", "--in", "2h", "-o", "json")
	var rec map[string]any
	if err := json.Unmarshal([]byte(out), &rec); err != nil || rec["created"] != false {
		t.Fatalf("second schedule: %v %s", err, out)
	}
	e.expect(0, "get", "hello")
	e.expect(0, "reschedule", "hello", "--in", "3h")
	e.expect(0, "list")
	e.expect(0, "stats")
	e.expect(0, "export", "--state", "scheduled")
	e.expect(0, "version")
	e.expect(0, "completion", "bash")

	// 2: usage errors.
	e.expect(2, "schedule", "x", "--at", "garbage")
	e.expect(2, "schedule", "x", "--in", "-1s")
	e.expect(2, "schedule", "x", "--in", "1s", "--at", "1")
	e.expect(2, "schedule", "x")
	e.expect(2, "schedule", strings.Repeat("i", 257), "--in", "1s")
	e.expect(2, "schedule", "x", "--in", "1s", "--payload-file", "/no/such/file")
	e.expect(2, "nosuchcommand")
	e.expect(2, "--nosuchflag", "list")
	e.expect(2, "get")
	e.expect(2, "--namespace", "has space", "list")

	// 3: not found.
	e.expect(3, "get", "nope")
	e.expect(3, "cancel", "nope")

	// 5: wait timed out.
	out = e.expect(5, "wait", "hello", "--timeout", "200ms")
	if !strings.Contains(out, "did not fire within 200ms") {
		t.Fatalf("wait timeout: %s", out)
	}

	// 0: fire and wait; the claim stands in for a timerworker, once the
	// waiting timerctl has subscribed, so the wakeup is what ends it.
	e.expect(0, "fire", "hello")
	wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
	defer wcancel()
	wc := e.cmd(wctx, "", "wait", "hello", "--timeout", "20s", "-o", "json")
	var wout, werr bytes.Buffer
	wc.Stdout, wc.Stderr = &wout, &werr
	if err := wc.Start(); err != nil {
		t.Fatal(err)
	}
	rdb, ch := e.srv.Client(t), q.Keys().Timer("hello")
	redistest.Eventually(t, 10*time.Second, "timerctl wait to subscribe", func() bool {
		n, err := rdb.PubSubNumSub(ctx, ch).Result()
		return err == nil && n[ch] > 0
	})
	if _, err := q.Engine().Claim(ctx, 10); err != nil {
		t.Fatal(err)
	}
	if err := wc.Wait(); err != nil || !strings.Contains(wout.String(), `"state": "fired"`) {
		t.Fatalf("wait: %v\nstdout: %s\nstderr: %s", err, wout.String(), werr.String())
	}

	// 4: conflicts.
	e.expect(4, "cancel", "hello")
	e.expect(4, "reschedule", "hello", "--in", "1m")
	e.expect(0, "schedule", "c", "--in", "1h")
	e.expect(0, "cancel", "c")
	e.expect(4, "reschedule", "c", "--in", "1m")
	e.expect(4, "wait", "c")

	// 2: import with a broken line still imports the rest.
	c := e.cmd(ctx, `{"id":"i1","in":"1h"}`+"\n"+`{"id":`+"\n"+`{"id":"i2","in":"1h"}`+"\n", "import")
	var so, se bytes.Buffer
	c.Stdout, c.Stderr = &so, &se
	if err := c.Run(); c.ProcessState.ExitCode() != 2 || !strings.Contains(se.String(), "line 2:") || !strings.Contains(so.String(), "created 2, existing 0, rejected 1") {
		t.Fatalf("import: %v %q %q", err, so.String(), se.String())
	}

	// 1: Redis unreachable, with the password redacted.
	code, _, errOut := e.run("--redis", "redis://admin:s3cret@127.0.0.1:1/0", "--timeout", "1s", "list")
	if code != 1 || strings.Contains(errOut, "s3cret") || !strings.Contains(errOut, "xxxxx") {
		t.Fatalf("unreachable: exit %d %q", code, errOut)
	}
	// go-redis's own log lines stay out of the operator's way.
	if strings.Count(errOut, "\n") != 1 {
		t.Fatalf("more than one line on stderr: %q", errOut)
	}
}

func TestVersionIsStampedAtBuild(t *testing.T) {
	want := "timerctl v9.9.9-test (" + runtime.Version() + ")\n"
	for _, arg := range []string{"version", "--version"} {
		out, err := exec.Command(binary(t), arg).Output()
		if err != nil || string(out) != want {
			t.Fatalf("%s: %v %q, want %q", arg, err, out, want)
		}
	}
}

func TestCompletionOfCommandNames(t *testing.T) {
	out, err := exec.Command(binary(t), "--generate-bash-completion").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"schedule", "wait", "watch", "import"} {
		if !strings.Contains(string(out), name+"\n") {
			t.Errorf("completion lacks %q:\n%s", name, out)
		}
	}
}

// syncBuf is a bytes.Buffer that a running command may write while the
// test reads it.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestWatchEndsOnInterruptWithZero: Ctrl-C is how an operator ends watch,
// so it is a success.
func TestWatchEndsOnInterruptWithZero(t *testing.T) {
	e := newEnv(t)
	q := e.queue()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := e.cmd(ctx, "", "watch")
	var out, errOut syncBuf
	c.Stdout, c.Stderr = &out, &errOut
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	// watch announces itself once it has fixed where in the stream it
	// starts: a fire from then on is shown.
	redistest.Eventually(t, 10*time.Second, "watch to start", func() bool { return strings.Contains(errOut.String(), "watching fires") })
	if _, err := q.Schedule(ctx, "seen", time.Now().Add(-time.Second), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Engine().Claim(ctx, 10); err != nil {
		t.Fatal(err)
	}
	redistest.Eventually(t, 10*time.Second, "watch to print the fire", func() bool {
		return strings.Contains(out.String(), "seen") && strings.Contains(out.String(), "late ")
	})
	if err := c.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	err := c.Wait()
	if err != nil {
		t.Fatalf("watch after Ctrl-C: %v, want exit 0; stderr %q", err, errOut.String())
	}
	if !strings.Contains(out.String(), "seen") || !strings.Contains(out.String(), "late ") {
		t.Fatalf("watch printed %q", out.String())
	}
}

// TestReadmeSession runs the timerctl session that README.md shows, with a
// poller as the worker, and checks that each command succeeds and prints
// the rows the README shows (times aside).
func TestReadmeSession(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, block, ok := strings.Cut(string(readme), "<!-- session")
	block, _, ok2 := strings.Cut(block, "<!-- end session -->")
	if !ok || !ok2 {
		t.Fatal("README.md has no <!-- session --> … <!-- end session --> block")
	}
	block = block[strings.Index(block, "```")+3 : strings.LastIndex(block, "```")]

	type step struct {
		args []string
		want []string // the first column of each line shown
	}
	var steps []step
	for _, line := range strings.Split(strings.Trim(block, "\n"), "\n") {
		if cmd, ok := strings.CutPrefix(line, "$ timerctl "); ok {
			steps = append(steps, step{args: shellWords(t, cmd)})
			continue
		}
		if len(steps) == 0 {
			t.Fatalf("README session starts with %q, not a $ timerctl command", line)
		}
		s := &steps[len(steps)-1]
		s.want = append(s.want, firstColumn(line))
	}
	for _, want := range []string{"schedule", "list", "wait", "stats"} {
		found := false
		for _, s := range steps {
			found = found || s.args[0] == want
		}
		if !found {
			t.Errorf("the README session does not show %q", want)
		}
	}

	e := newEnv(t)
	q := e.queue()
	p, err := poller.New(q, poller.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("poller: %v", err)
		}
	}()

	for _, s := range steps {
		out := e.expect(0, s.args...)
		var got []string
		for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
			got = append(got, firstColumn(line))
		}
		if strings.Join(got, "|") != strings.Join(s.want, "|") {
			t.Errorf("timerctl %q printed rows %q; README shows %q\n%s", s.args, got, s.want, out)
		}
	}
}

// firstColumn is a line's text up to its first run of two spaces: the
// row's label, or its ID.
func firstColumn(line string) string {
	if i := strings.Index(line, "  "); i >= 0 {
		return line[:i]
	}
	return line
}

// shellWords splits a command line as a POSIX shell would, for the
// single-quoted words the README uses.
func shellWords(t *testing.T, s string) []string {
	var words []string
	var cur strings.Builder
	quoted, inWord := false, false
	for _, r := range s {
		switch {
		case r == '\'':
			quoted, inWord = !quoted, true
		case r == ' ' && !quoted:
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
			}
			inWord = false
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if quoted {
		t.Fatalf("unbalanced quote in %q", s)
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words
}
