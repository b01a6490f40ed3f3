package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/timerq/timerq/internal/consistency"
	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/queue"
)

// TestWorkerReportsMissingRight is issue 10's reproduction: a user with
// '~timerq:{ns3}:* +@all' has no channel right on Redis 7. The worker exits
// 1 at start-up naming the channel right, leaves both timers untouched, and
// fires each exactly once when granted it. A right lost at run time stops it
// the same way.
func TestWorkerReportsMissingRight(t *testing.T) {
	srv := redistest.Start(t, redistest.Config{})
	admin := srv.Client(t)
	ctx := context.Background()
	acl := func(rules ...string) {
		t.Helper()
		args := []any{"ACL", "SETUSER", "tq"}
		for _, r := range rules {
			args = append(args, r)
		}
		if err := admin.Do(ctx, args...).Err(); err != nil {
			t.Fatal(err)
		}
	}
	acl("on", ">pw", "~timerq:{ns3}:*", "+@all")
	q, err := queue.New(admin, queue.Options{Namespace: "ns3"})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	for _, id := range []string{"r1", "r2"} {
		if _, err := q.Schedule(ctx, id, time.Now().Add(-time.Second), nil); err != nil {
			t.Fatal(err)
		}
	}
	url := "redis://tq:pw@" + srv.Addr() + "/0"

	// exitWithin bounds the wait for a worker that should stop: generous,
	// since a loaded machine can take seconds just to start the process
	// (CI saw one print nothing in 5 s at load 20); a passing run waits
	// only as long as the worker takes.
	const exitWithin = 30 * time.Second
	exit := func(w *proc, within time.Duration) (int, string) {
		t.Helper()
		select {
		case <-w.done:
		case <-time.After(within):
			t.Fatalf("worker still runs after %v; log:\n%s", within, w.logText())
		}
		return w.cmd.ProcessState.ExitCode(), w.logText()
	}
	consistent := func(what string) {
		t.Helper()
		bad, err := consistency.Check(ctx, admin, q, false)
		if err != nil || len(bad) > 0 {
			t.Fatalf("%s: inconsistent: %v %v", what, bad, err)
		}
	}

	code, log := exit(startWorker(t, "--redis", url, "--namespace", "ns3"), exitWithin)
	lines := strings.Split(strings.TrimSpace(log), "\n")
	last := lines[len(lines)-1]
	if code != 1 || !strings.HasPrefix(last, "timerworker: ") ||
		!strings.Contains(last, "may not publish to the channel timerq:{ns3}:") || !strings.Contains(last, "&timerq:{ns3}:*") {
		t.Fatalf("exit %d, last line %q; want exit 1 naming the channel and the rule &timerq:{ns3}:*; log:\n%s", code, last, log)
	}
	t.Logf("start-up refusal: %s", last)
	if strings.Contains(log, "claim failed") {
		t.Errorf("the worker claimed before reporting the missing right; log:\n%s", log)
	}
	for _, id := range []string{"r1", "r2"} {
		if tm, err := q.Get(ctx, id); err != nil || tm.State != queue.StateScheduled {
			t.Errorf("%s after the refused start = %+v, %v; want untouched", id, tm, err)
		}
	}
	consistent("the refused start")

	acl("&timerq:{ns3}:*")
	w := startWorker(t, "--redis", url, "--namespace", "ns3")
	waitFor(t, exitWithin, "r1 and r2 to fire", func() bool {
		s, err := q.Stats(ctx)
		return err == nil && s.Fired == 2
	})
	if counts := fireCounts(t, admin, q); counts["r1"] != 1 || counts["r2"] != 1 || len(counts) != 2 {
		t.Errorf("fire stream counts %v, want r1 and r2 once each", counts)
	}

	// Lost at run time: the next claim that needs PUBLISH stops the worker.
	acl("-publish")
	if _, err := q.Schedule(ctx, "r3", time.Now(), nil); err != nil {
		t.Fatal(err)
	}
	code, log = exit(w, exitWithin)
	lines = strings.Split(strings.TrimSpace(log), "\n")
	last = lines[len(lines)-1]
	if code != 1 || !strings.HasPrefix(last, "timerworker: ") || !strings.Contains(last, "may not run PUBLISH") || !strings.Contains(last, "+publish") {
		t.Fatalf("exit %d, last line %q; want exit 1 naming +publish; log:\n%s", code, last, log)
	}
	t.Logf("run-time refusal: %s", last)
	if tm, err := q.Get(ctx, "r3"); err != nil || tm.State != queue.StateScheduled {
		t.Errorf("r3 = %+v, %v; want untouched", tm, err)
	}
	consistent("the refused claim")
}
