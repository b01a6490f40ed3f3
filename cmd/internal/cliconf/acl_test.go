package cliconf_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/timerq/timerq/cmd/internal/cliconf"
	"github.com/timerq/timerq/cmd/internal/ctl"
	"github.com/timerq/timerq/deliver/dispatch"
	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/internal/uitest"
	"github.com/timerq/timerq/poller"
	"github.com/timerq/timerq/queue"
	"github.com/timerq/timerq/ui"
)

// aclLines returns docs/security.md's ACL SETUSER lines by role name
// (worker, app, ops, ui-readonly, ui), so that the test runs what the docs
// say.
func aclLines(t *testing.T) map[string][]string {
	t.Helper()
	doc, err := os.ReadFile("../../../docs/security.md")
	if err != nil {
		t.Fatal(err)
	}
	_, block, ok := strings.Cut(string(doc), "<!-- acl")
	block, _, ok2 := strings.Cut(block, "<!-- end acl -->")
	if !ok || !ok2 {
		t.Fatal("docs/security.md has no <!-- acl --> … <!-- end acl --> block")
	}
	out := map[string][]string{}
	for _, line := range strings.Split(block, "\n") {
		if !strings.HasPrefix(line, "ACL SETUSER timerq-") {
			continue
		}
		f := strings.Fields(line)
		role := strings.TrimSuffix(strings.TrimPrefix(f[2], "timerq-"), "-NS")
		out[role] = f
	}
	for _, r := range []string{"worker", "app", "api", "ops", "ui-readonly", "ui"} {
		if out[r] == nil {
			t.Fatalf("docs/security.md lacks the ACL line of timerq-%s-NS", r)
		}
	}
	return out
}

// createUser runs a role's documented line for namespace ns and returns
// a client logged in as that user.
func createUser(t *testing.T, srv *redistest.Server, admin *redis.Client, line []string, ns string) (*redis.Client, string) {
	t.Helper()
	var args []any
	user := ""
	for i, w := range line {
		w = strings.ReplaceAll(w, "NS", ns)
		if i == 2 {
			user = w
		}
		if strings.HasPrefix(w, ">") {
			w = ">pw"
		}
		args = append(args, w)
	}
	if err := admin.Do(context.Background(), args...).Err(); err != nil {
		t.Fatalf("%s: %v", strings.Join(line, " "), err)
	}
	c := redis.NewClient(&redis.Options{Addr: srv.Addr(), Username: user, Password: "pw"})
	t.Cleanup(func() { c.Close() })
	return c, "redis://" + user + ":pw@" + srv.Addr() + "/0"
}

// snapshot is every key of a namespace with its serialized value.
func snapshot(t *testing.T, admin *redis.Client, ns string) map[string]string {
	t.Helper()
	ctx := context.Background()
	keys, err := admin.Keys(ctx, "timerq:{"+ns+"}:*").Result()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, k := range keys {
		out[k] = admin.Dump(ctx, k).Val()
	}
	return out
}

// refused checks that err is an ACL refusal, in the form callers test
// and operators read.
func refused(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, queue.ErrPermission) {
		t.Errorf("%s on another namespace: %v, want queue.ErrPermission", what, err)
		return
	}
	t.Logf("%s refused: %v", what, err)
	// The Go error names the right, for library users...
	named := strings.Contains(err.Error(), "(missing right: ") || strings.Contains(err.Error(), "with the ACL rule ")
	if !named || strings.Contains(err.Error(), "missing right: see") {
		t.Errorf("%s: %q does not name the missing right", what, err)
	}
	// ...and both binaries print it with the hint.
	e := cliconf.Explain(err, cliconf.Target{Namespace: "theirs"})
	if !strings.Contains(e.Error(), "missing right: ") || strings.Contains(e.Error(), "missing right: see") ||
		!strings.Contains(e.Error(), "docs/security.md") || e.ExitCode() != cliconf.ExitFailure {
		t.Errorf("%s: explained as %q (exit %d), want the missing right and docs/security.md", what, e, e.ExitCode())
	}
}

// TestACLRoles runs the five roles of docs/security.md on real Redis:
// each works on its own namespace, and on another one each operation is
// refused with queue.ErrPermission, naming the right, with nothing written.
func TestACLRoles(t *testing.T) {
	lines := aclLines(t)
	srv := redistest.Start(t, redistest.Config{})
	admin := srv.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	mine, theirs := redistest.Namespace(t), "theirs"
	adminQ := func(ns string) *queue.Queue {
		q, err := queue.New(admin, queue.Options{Namespace: ns})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { q.Close() })
		return q
	}
	// The other namespace holds a scheduled, a due and a fired timer.
	other := adminQ(theirs)
	for _, id := range []string{"a", "due", "done"} {
		due := time.Now().Add(time.Hour)
		if id != "a" {
			due = time.Now().Add(-time.Second)
		}
		if _, err := other.Schedule(ctx, id, due, []byte(id)); err != nil {
			t.Fatal(err)
		}
		if id == "done" {
			if _, err := other.Engine().Claim(ctx, 10); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := other.Schedule(ctx, "due2", time.Now().Add(-time.Second), nil); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, admin, theirs)

	t.Run("worker", func(t *testing.T) {
		rdb, _ := createUser(t, srv, admin, lines["worker"], mine)
		if err := cliconf.CheckServer(ctx, rdb, srv.Addr(), cliconf.NeedCore); err != nil {
			t.Fatalf("version check: %v", err)
		}
		// Long enough that the poller's own purge cannot remove the fired
		// timer before the test reads it; short enough for the purge below.
		q, err := queue.New(rdb, queue.Options{Namespace: mine, Retention: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer q.Close()
		if _, err := adminQ(mine).Schedule(ctx, "w", time.Now().Add(-time.Second), nil); err != nil {
			t.Fatal(err)
		}
		// A poller fires it and takes the maintenance lock.
		p, err := poller.New(q, poller.Options{})
		if err != nil {
			t.Fatal(err)
		}
		pctx, stop := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- p.Run(pctx) }()
		waitUntil(t, 10*time.Second, "the worker role to claim and take the maintenance lock", func() bool {
			return p.HoldsMaintenance() && !p.LastClaim().IsZero()
		})
		stop()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		tm, err := adminQ(mine).Get(ctx, "w")
		if err != nil || tm.State != queue.StateFired {
			t.Fatalf("worker did not fire: %+v %v", tm, err)
		}
		// The retention must pass by the server's clock (a real server's
		// cannot be moved, so it is awaited).
		waitUntil(t, 10*time.Second, "the retention to pass", func() bool {
			now, err := admin.Time(ctx).Result()
			return err == nil && now.After(tm.FiredAt.Add(time.Second))
		})
		if n, _, err := q.Engine().Purge(ctx, 10); err != nil || n != 1 {
			t.Fatalf("purge: %d %v", n, err)
		}
		if _, err := q.Stats(ctx); err != nil {
			t.Fatalf("stats: %v", err)
		}

		o, err := queue.New(rdb, queue.Options{Namespace: theirs})
		if err != nil {
			t.Fatal(err)
		}
		defer o.Close()
		_, err = o.Engine().Claim(ctx, 10)
		refused(t, "claim", err)
		_, _, err = o.Engine().Purge(ctx, 10)
		refused(t, "purge", err)
	})

	t.Run("app", func(t *testing.T) {
		rdb, _ := createUser(t, srv, admin, lines["app"], mine)
		q, err := queue.New(rdb, queue.Options{Namespace: mine})
		if err != nil {
			t.Fatal(err)
		}
		defer q.Close()
		got := make(chan string, 4)
		cctx, stopConsume := context.WithCancel(ctx)
		var wg sync.WaitGroup
		wg.Go(func() {
			err := q.Consume(cctx, "g", "c", func(_ context.Context, e queue.Event) error { got <- e.ID; return nil },
				queue.ConsumeOptions{Block: 100 * time.Millisecond, OnError: func(err error) { t.Errorf("consume: %v", err) }})
			if err != nil && !errors.Is(err, context.Canceled) {
				t.Errorf("Consume: %v", err)
			}
		})
		defer func() { stopConsume(); wg.Wait() }()
		for _, id := range []string{"x", "y"} {
			if _, err := q.Schedule(ctx, id, time.Now().Add(time.Hour), []byte("p")); err != nil {
				t.Fatalf("schedule: %v", err)
			}
		}
		if _, err := q.Cancel(ctx, "y"); err != nil {
			t.Fatalf("cancel: %v", err)
		}
		// A timer that delivers to an endpoint (the operator made it).
		ep := queue.Endpoint{Name: "billing", URL: "https://billing.example.com/",
			Secrets: []queue.Secret{queue.Secret("whsec_" + strings.Repeat("QUFB", 8))}}
		if _, err := adminQ(mine).Endpoints().Put(ctx, ep, nil); err != nil {
			t.Fatal(err)
		}
		if _, err := q.ScheduleBatch(ctx, []queue.NewTimer{{ID: "d", Due: time.Now().Add(time.Hour), Endpoint: "billing"}}); err != nil {
			t.Fatalf("schedule a delivering timer: %v", err)
		}
		if _, err := q.Cancel(ctx, "d"); err != nil {
			t.Fatalf("cancel: %v", err)
		}
		// Debounce: a window opened, then pushed.
		for range 2 {
			if _, err := q.Debounce(ctx, "dk", queue.DebounceOptions{Delay: time.Hour, MaxWait: 2 * time.Hour}); err != nil {
				t.Fatalf("debounce: %v", err)
			}
		}
		if _, err := q.Reschedule(ctx, "x", time.Now().Add(300*time.Millisecond)); err != nil {
			t.Fatalf("reschedule: %v", err)
		}
		waited := make(chan error, 1)
		go func() { waited <- q.Wait(ctx, "x") }()
		// The worker's part: fire x now rather than wait out its 300 ms.
		if _, err := adminQ(mine).FireNow(ctx, "x"); err != nil {
			t.Fatal(err)
		}
		if _, err := adminQ(mine).Engine().Claim(ctx, 10); err != nil {
			t.Fatal(err)
		}
		if err := <-waited; err != nil {
			t.Fatalf("wait: %v", err)
		}
		// The group reads the stream from its start: the worker's fire
		// first, then x.
		for id := ""; id != "x"; {
			select {
			case id = <-got:
			case <-ctx.Done():
				t.Fatal("x was not consumed")
			}
		}
		// Occurrences of a schedule under the skip overlap policy run the
		// consumer's overlap script: s@1 is handled, s@2 (read with it)
		// skipped and counted.
		if _, _, err := adminQ(mine).Recurring().Put(ctx, queue.Recurring{ID: "s", Every: time.Hour, Overlap: queue.OverlapSkip}); err != nil {
			t.Fatal(err)
		}
		// Restored: Schedule refuses an occurrence's ID for a plain timer.
		past := time.Now().Add(-time.Second)
		if _, err := adminQ(mine).Restore(ctx, []queue.Timer{{ID: "s@1", State: queue.StateScheduled, Due: past, CreatedAt: past},
			{ID: "s@2", State: queue.StateScheduled, Due: past, CreatedAt: past}}); err != nil {
			t.Fatal(err)
		}
		if _, err := adminQ(mine).Engine().Claim(ctx, 10); err != nil {
			t.Fatal(err)
		}
		select {
		case id := <-got:
			if id != "s@1" {
				t.Fatalf("consumed %q, want s@1", id)
			}
		case <-ctx.Done():
			t.Fatal("s@1 was not consumed")
		}
		redistest.Eventually(t, 10*time.Second, "s@2 to be skipped", func() bool {
			c, _ := adminQ(mine).Inspect().Counters(ctx)
			return c.OverlapSkipped == 1
		})

		o, err := queue.New(rdb, queue.Options{Namespace: theirs})
		if err != nil {
			t.Fatal(err)
		}
		defer o.Close()
		_, err = o.Schedule(ctx, "new", time.Now().Add(time.Hour), nil)
		refused(t, "schedule", err)
		_, err = o.Cancel(ctx, "a")
		refused(t, "cancel", err)
		_, err = o.Reschedule(ctx, "a", time.Now())
		refused(t, "reschedule", err)
		_, err = o.Debounce(ctx, "dk", queue.DebounceOptions{Delay: time.Hour, MaxWait: 2 * time.Hour})
		refused(t, "debounce", err)
		_, err = o.Get(ctx, "a")
		refused(t, "get", err)
		// Consume retries Redis errors and reports each to OnError.
		cctx2, stop2 := context.WithTimeout(ctx, 5*time.Second)
		var once sync.Once
		var consumeErr error
		_ = o.Consume(cctx2, "g", "c", func(context.Context, queue.Event) error { return nil }, queue.ConsumeOptions{
			OnError: func(err error) { once.Do(func() { consumeErr = err; stop2() }) },
		})
		stop2()
		refused(t, "consume", consumeErr)
		wctx, wcancel := context.WithTimeout(ctx, 3*time.Second)
		err = o.Wait(wctx, "a")
		wcancel()
		refused(t, "wait", err)
	})

	t.Run("ops", func(t *testing.T) {
		_, url := createUser(t, srv, admin, lines["ops"], mine)
		if _, err := adminQ(mine).Schedule(ctx, "o", time.Now().Add(time.Hour), nil); err != nil {
			t.Fatal(err)
		}
		run := func(ctx context.Context, ns string, args ...string) (int, string, string) {
			var out, errOut bytes.Buffer
			code := ctl.Run(ctx, append([]string{"timerctl", "--redis", url, "-n", ns}, args...), ctl.Options{Stdout: &out, Stderr: &errOut})
			return code, out.String(), errOut.String()
		}
		for _, args := range [][]string{{"get", "o"}, {"list"}, {"stats"}} {
			if code, _, stderr := run(ctx, mine, args...); code != 0 {
				t.Errorf("timerctl %s on its namespace: exit %d %s", args, code, stderr)
			}
		}
		wctx, wcancel := context.WithTimeout(ctx, time.Second)
		code, _, stderr := run(wctx, mine, "watch")
		wcancel()
		if code != 0 || strings.Contains(stderr, "timerctl: ") {
			t.Errorf("watch on its namespace: exit %d %q", code, stderr)
		}
		// Its own namespace, but a write: refused too.
		if code, _, stderr := run(ctx, mine, "cancel", "o"); code != 1 || !strings.Contains(stderr, "missing right: +") {
			t.Errorf("cancel by the read-only role: exit %d %q, want 1 naming the command", code, stderr)
		}
		for _, args := range [][]string{{"get", "a"}, {"list"}, {"stats"}, {"watch"}, {"schedule", "n", "--in", "1h"}} {
			code, _, stderr := run(ctx, theirs, args...)
			if code != 1 || !strings.Contains(stderr, "missing right: ") || !strings.Contains(stderr, "docs/security.md") {
				t.Errorf("timerctl %s on another namespace: exit %d %q, want 1, the missing right and docs/security.md", args, code, stderr)
			}
		}
		if tm, err := adminQ(mine).Get(ctx, "o"); err != nil || tm.State != queue.StateScheduled {
			t.Errorf("the read-only role changed a timer: %+v %v", tm, err)
		}
	})

	// The dashboard roles: every page of a namespace with timers, fires, a
	// consumer group, a dead letter and schedules; with actions, each
	// action; and on another namespace, refusals that name the right.
	seedJob := map[string]string{} // a bulk cancel job of each seed, by prefix, for its page
	seedDashboard := func(t *testing.T, prefix string) (deadID string) {
		q := adminQ(mine)
		for _, id := range []string{"t1", "t2", "t3", "b1"} {
			if _, err := q.Schedule(ctx, prefix+id, time.Now().Add(time.Hour), []byte("p")); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := q.Schedule(ctx, prefix+"f", time.Now().Add(-time.Second), nil); err != nil {
			t.Fatal(err)
		}
		if j, err := q.CancelMatching(ctx, queue.CancelFilter{IDPrefix: prefix + "b"}); err != nil || j.Counts.Cancelled != 1 {
			t.Fatalf("bulk cancel of %sb = %+v, %v", prefix, j, err)
		} else {
			seedJob[prefix] = j.ID
		}
		if _, err := q.Engine().Claim(ctx, 100); err != nil {
			t.Fatal(err)
		}
		_ = admin.XGroupCreate(ctx, q.Keys().Stream(0), "billing", "0").Err() // made by the first role
		deadID, err := admin.XAdd(ctx, &redis.XAddArgs{Stream: q.Keys().DeadLetter(0), Values: []any{
			"id", prefix + "f", "due", "1", "fired", "2", "payload", "", "error", "broke", "attempts", "5",
			"group", "billing", "consumer", "c1", "stream_id", "1-0"}}).Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range []string{"s1", "s2"} {
			if _, _, err := q.Recurring().Put(ctx, queue.Recurring{ID: prefix + id, Every: time.Hour}); err != nil {
				t.Fatal(err)
			}
		}
		// A delivering timer, fired, with an attempt logged and its fire
		// dead-lettered by the delivery group.
		ep := queue.Endpoint{Name: "hooks", URL: "https://hooks.example.com/",
			Secrets: []queue.Secret{queue.Secret("whsec_" + strings.Repeat("QUFB", 8))}}
		if _, err := q.Endpoints().Put(ctx, ep, nil); err != nil {
			t.Fatal(err)
		}
		if _, err := q.ScheduleBatch(ctx, []queue.NewTimer{{ID: prefix + "d", Due: time.Now().Add(-time.Second), Endpoint: "hooks"}}); err != nil {
			t.Fatal(err)
		}
		if _, err := q.Engine().Claim(ctx, 10); err != nil {
			t.Fatal(err)
		}
		for done := false; !done; {
			ds, err := q.Lease(ctx, dispatch.DefaultGroup, "d", queue.LeaseOptions{Count: 100, Block: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range ds {
				if d.Event.ID != prefix+"d" {
					continue
				}
				a := queue.DeliveryAttempt{TimerID: d.Event.ID, Attempt: 1, Due: d.Event.Due, StreamID: d.Event.StreamID, At: time.Now(),
					Status: 500, Outcome: "dead_letter", Reason: "exhausted", Error: "boom"}
				if _, err := q.Release(ctx, dispatch.DefaultGroup, d.DeliveryID, queue.ReleaseOptions{DeadLetter: true, Log: &a}, queue.LeaseOptions{}); err != nil {
					t.Fatal(err)
				}
				done = true
			}
		}
		// A flow key with one delivery in flight and one parked, for the
		// flows page.
		if err := q.Flows().PutPolicy(ctx, queue.FlowPolicy{Key: prefix + "k", Rate: 1000, Period: time.Second, MaxInFlight: 1}); err != nil {
			t.Fatal(err)
		}
		if _, err := q.ScheduleBatch(ctx, []queue.NewTimer{{ID: prefix + "k1", Due: time.Now().Add(-time.Second), FlowKey: prefix + "k"},
			{ID: prefix + "k2", Due: time.Now().Add(-time.Second), FlowKey: prefix + "k"}}); err != nil {
			t.Fatal(err)
		}
		if _, err := q.Engine().Claim(ctx, 100); err != nil {
			t.Fatal(err)
		}
		if _, err := q.Lease(ctx, dispatch.DefaultGroup, "c1", queue.LeaseOptions{Lease: time.Minute, Count: 100}); err != nil {
			t.Fatal(err)
		}
		st, err := q.Flows().Stats(ctx, dispatch.DefaultGroup, 0)
		if err != nil || !slices.ContainsFunc(st, func(s queue.FlowStat) bool { return s.Key == prefix+"k" && s.Backlog == 1 && s.InFlight == 1 }) {
			t.Fatalf("flow stats after seeding = %+v, %v; want %sk with 1 parked, 1 in flight", st, err, prefix)
		}
		return deadID
	}
	pages := func(prefix string) []string {
		return []string{"/", "/timers", "/timers?prefix=" + prefix, "/timer?id=" + prefix + "t1", "/tail", "/groups",
			"/schedules", "/schedule?id=" + prefix + "s1", "/endpoints", "/timer?id=" + prefix + "d", "/deliveries", "/deliveries?endpoint=hooks", "/flows",
			"/cancel-jobs", "/cancel-job?id=" + seedJob[prefix]}
	}
	t.Run("ui-readonly", func(t *testing.T) {
		rdb, _ := createUser(t, srv, admin, lines["ui-readonly"], mine)
		seedDashboard(t, "ro-")
		d := newDashboard(t, rdb, mine, false)
		for _, p := range pages("ro-") {
			d.ok(p)
		}
		d.tailHasNoProblem()
		// The same user behind a dashboard with actions: an action is
		// refused by Redis, naming the right, and changes nothing.
		w := newDashboard(t, rdb, mine, true)
		if code, body := w.act("/timer/confirm?id=ro-t1&action=cancel"); code != 502 || !strings.Contains(body, "grant it with the ACL rule &#43;zadd") {
			t.Errorf("cancel under the read-only role = %d, want 502 naming the missing right:\n%s", code, body)
		}
		if tm, err := adminQ(mine).Get(ctx, "ro-t1"); err != nil || tm.State != queue.StateScheduled {
			t.Errorf("the read-only dashboard role changed a timer: %+v %v", tm, err)
		}
		o := newDashboard(t, rdb, theirs, false)
		for _, p := range []string{"/", "/timers", "/groups"} {
			if code, body := o.get(p); code == 200 || !strings.Contains(body, "missing right") {
				t.Errorf("GET %s on another namespace = %d, want a refusal naming the missing right:\n%s", p, code, body)
			}
		}
	})
	t.Run("ui", func(t *testing.T) {
		rdb, _ := createUser(t, srv, admin, lines["ui"], mine)
		deadID := seedDashboard(t, "rw-")
		d := newDashboard(t, rdb, mine, true)
		for _, p := range pages("rw-") {
			d.ok(p)
		}
		d.tailHasNoProblem()
		for _, p := range []string{"/timer/confirm?id=rw-t1&action=cancel", "/timer/confirm?id=rw-t2&action=fire",
			"/timer/confirm?id=rw-t3&action=reschedule&due=2031-05-06T07:08:09Z", "/schedule/confirm?id=rw-s1&action=pause",
			"/schedule/confirm?id=rw-s1&action=resume", "/schedule/confirm?id=rw-s2&action=delete", "/dead/confirm?id=" + deadID,
			"/deliveries/confirm?endpoint=hooks", "/endpoints/confirm?name=hooks&action=disable", "/cancel-jobs/confirm?prefix=rw-t"} {
			if code, body := d.act(p); code != 303 {
				t.Errorf("%s under the ui role = %d, want 303:\n%s", p, code, body)
			}
		}
		q := adminQ(mine)
		if tm, _ := q.Get(ctx, "rw-t1"); tm.State != queue.StateCancelled {
			t.Errorf("rw-t1 is %v after cancel", tm.State)
		}
		if tm, _ := q.Get(ctx, "rw-t3"); tm.State != queue.StateCancelled {
			t.Errorf("rw-t3 is %v after the bulk cancel of rw-t", tm.State)
		}
		if n, _ := q.Deliveries().DeadLetterCount(ctx); n != 1 {
			t.Errorf("%d dead letters after requeueing one of two and redriving the delivery, want 1", n)
		}
		if ep, err := q.Endpoints().Get(ctx, "hooks"); err != nil || !ep.Disabled {
			t.Errorf("hooks after disabling it: %+v %v", ep, err)
		}
		o := newDashboard(t, rdb, theirs, true)
		if code, body := o.act("/timer/confirm?id=a&action=cancel"); code == 303 || !strings.Contains(body, "missing right") {
			t.Errorf("cancel on another namespace = %d, want a refusal naming the missing right:\n%s", code, body)
		}
	})

	after := snapshot(t, admin, theirs)
	if len(after) != len(before) {
		t.Fatalf("keys of the other namespace changed: %d before, %d after", len(before), len(after))
	}
	for k, v := range before {
		if after[k] != v {
			t.Errorf("refused operations wrote %s", k)
		}
	}
}

// dashboard is a ui.Handler of one namespace served over HTTP, for the
// dashboard roles.
type dashboard struct {
	t *testing.T
	*uitest.Client
}

func newDashboard(t *testing.T, rdb redis.UniversalClient, ns string, writes bool) *dashboard {
	t.Helper()
	q, err := queue.New(rdb, queue.Options{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Close() })
	h, err := ui.New(q, ui.Options{AllowWrites: writes})
	if err != nil {
		t.Fatal(err)
	}
	return &dashboard{t: t, Client: uitest.Serve(t, h, "")}
}

func (d *dashboard) get(path string) (int, string) {
	d.t.Helper()
	resp, body := d.Get(d.t, path)
	return resp.StatusCode, body
}

func (d *dashboard) ok(path string) {
	d.t.Helper()
	if code, body := d.get(path); code != 200 || strings.Contains(body, `class="problem"`) {
		d.t.Errorf("GET %s = %d, want 200 with no problem reported:\n%s", path, code, body)
	}
}

// act submits an action through its confirmation page.
func (d *dashboard) act(confirm string) (int, string) {
	d.t.Helper()
	resp, body := d.Act(d.t, confirm)
	return resp.StatusCode, body
}

// tailHasNoProblem follows the live tail briefly: a refused read would be
// reported as a "problem" event.
func (d *dashboard) tailHasNoProblem() {
	d.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", d.URL+"/tail/events?after=0", nil)
	resp, err := d.HTTP.Do(req)
	if err != nil {
		d.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body) // ends with the deadline
	if resp.StatusCode != 200 || strings.Contains(string(b), "event: problem") {
		d.t.Errorf("live tail = %d:\n%s", resp.StatusCode, b)
	}
}
