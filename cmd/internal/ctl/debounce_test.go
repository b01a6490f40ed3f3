package ctl_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/timerq/timerq/cmd/internal/ctl"
	"github.com/timerq/timerq/internal/keyspace"
	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/queue"
)

type debounceJSON struct {
	Outcome    string    `json:"outcome"`
	Timer      timerJSON `json:"timer"`
	Now        string    `json:"now"`
	DeadlineAt string    `json:"deadline_at"`
}

// TestDebounce: timerctl debounce opens a window, pushes it, caps it at
// the deadline, in JSON and as a table, and opens the next window once
// the timer fired.
func TestDebounce(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		c := newCLI(t, b)
		first := decode[debounceJSON](t, c.ok("-o", "json", "debounce", "cart-7", "--delay", "1h", "--max-wait", "2h", "-p", "v1").stdout)
		now := mustTime(t, first.Now)
		if first.Outcome != "created" || first.Timer.ID != queue.DebounceID("cart-7", now.UnixMilli()) || string(first.Timer.Payload) != "v1" {
			t.Fatalf("first: %+v", first)
		}
		if mustTime(t, first.DeadlineAt) != now.Add(2*time.Hour) {
			t.Errorf("deadline %s, want %v + 2h", first.DeadlineAt, now)
		}
		redistest.AwaitServerTime(t, b.Client, now.Add(2*time.Millisecond))
		pushed := decode[debounceJSON](t, c.ok("-o", "json", "debounce", "cart-7", "--delay", "1h", "--max-wait", "2h", "-p", "v2", "--keep-first").stdout)
		if pushed.Outcome != "pushed" || pushed.Timer.ID != first.Timer.ID || string(pushed.Timer.Payload) != "v1" || pushed.Timer.DueAt <= first.Timer.DueAt {
			t.Fatalf("second: %+v, first due %s", pushed, first.Timer.DueAt)
		}
		table := c.ok("debounce", "cart-7", "--delay", "3h", "--max-wait", "3h").stdout
		if !strings.Contains(table, "result") || !strings.Contains(table, "capped; the window's deadline is ") || !strings.Contains(table, first.Timer.ID) {
			t.Fatalf("table:\n%s", table)
		}
		got, err := c.q.Get(t.Context(), first.Timer.ID)
		if err != nil || got.Due.Format(time.RFC3339Nano) != mustTime(t, first.DeadlineAt).Format(time.RFC3339Nano) || len(got.Payload) != 0 {
			t.Fatalf("in Redis: %+v %v", got, err)
		}
		c.ok("fire", first.Timer.ID)
		redistest.Eventually(t, 5*time.Second, "the window to fire", func() bool { return len(c.claim()) == 1 })
		next := decode[debounceJSON](t, c.ok("-o", "json", "debounce", "cart-7", "--delay", "1h", "--max-wait", "2h").stdout)
		if next.Outcome != "created" || next.Timer.ID == first.Timer.ID {
			t.Fatalf("after the fire: %+v, want a new window", next)
		}
	})
}

// TestDebounceBadInputWritesNothing: each bad call is a usage error
// naming the flag and what to do, and writes nothing.
func TestDebounceBadInputWritesNothing(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		c := newCLI(t, b)
		for _, tc := range []struct {
			args []string
			want string
		}{
			{[]string{"debounce", "k", "--delay", "5s"}, "missing --delay or --max-wait"},
			{[]string{"debounce", "k", "--max-wait", "5s"}, "missing --delay or --max-wait"},
			{[]string{"debounce", "--delay", "1s", "--max-wait", "5s"}, "missing the debounce key"},
			{[]string{"debounce", "k", "--delay", "soon", "--max-wait", "5s"}, `--delay "soon" is not a duration`},
			{[]string{"debounce", "k", "--delay", "-1s", "--max-wait", "5s"}, `--delay "-1s" is negative`},
			{[]string{"debounce", "k", "--delay", "0s", "--max-wait", "5s"}, "the debounce delay is 0s"},
			{[]string{"debounce", "k", "--delay", "1m", "--max-wait", "5s"}, "the debounce max wait 5s is shorter than the delay 1m0s"},
			{[]string{"debounce", "k", "--delay", "1s", "--max-wait", "9000h"}, "over the limit of 8760h0m0s"},
			{[]string{"debounce", strings.Repeat("k", queue.MaxDebounceKeyBytes+1), "--delay", "1s", "--max-wait", "5s"}, "use at most 240"},
			{[]string{"debounce", "k", "--delay", "1s", "--max-wait", "5s", "-p", strings.Repeat("p", 70<<10)}, "over the payload limit"},
		} {
			r := c.run(tc.args...)
			if r.code != ctl.ExitUsage || !strings.Contains(r.stderr, tc.want) || strings.Count(r.stderr, "\n") != 1 || r.stdout != "" {
				t.Errorf("%q: exit %d, stderr %q, want exit %d and %q", tc.args, r.code, r.stderr, ctl.ExitUsage, tc.want)
			}
		}
		if keys := c.keys(); len(keys) != 0 {
			t.Fatalf("bad input wrote keys: %v", keys)
		}
	})
}

type importResult struct {
	Created           int   `json:"created"`
	Existing          int   `json:"existing"`
	Rejected          int   `json:"rejected"`
	RejectedLines     []int `json:"rejected_lines"`
	SchedulesCreated  int   `json:"schedules_created"`
	SchedulesExisting int   `json:"schedules_existing"`
	Quarantined       int   `json:"quarantined"`
}

// TestDebounceWindowRoundTrip: export marks a debounce window's timer,
// with its deadline while the window is open, and import restores it
// (queue.RestoreDebounce): the open window's later calls push the same
// timer within the same deadline, and a fired window stays fired.
func TestDebounceWindowRoundTrip(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		c := newCLI(t, b)
		done := decode[debounceJSON](t, c.ok("-o", "json", "debounce", "done", "--delay", "1ms", "--max-wait", "1h").stdout)
		redistest.Eventually(t, 5*time.Second, "the closed window to fire", func() bool { return len(c.claim()) == 1 })
		open := decode[debounceJSON](t, c.ok("-o", "json", "debounce", "cart-7", "--delay", "1h", "--max-wait", "2h", "-p", "v1").stdout)
		c.ok("schedule", "plain", "--in", "1h")
		export := c.ok("export").stdout
		// Export keeps the deadline's microseconds, which -o json leaves out.
		if !strings.Contains(export, `"debounce":{"deadline_at":"`+strings.TrimSuffix(open.DeadlineAt, "Z")) || !strings.Contains(export, `"debounce":{}`) {
			t.Fatalf("export does not mark the windows:\n%s", export)
		}
		other := newCLI(t, b)
		r := other.runCtx(t.Context(), export, "-o", "json", "import", "-")
		if r.code != 0 || fmt.Sprint(decode[importResult](t, r.stdout)) != fmt.Sprint(importResult{Created: 3, RejectedLines: []int{}}) {
			t.Fatalf("import: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
		}
		got, err := other.q.Get(t.Context(), open.Timer.ID)
		if err != nil || got.State != queue.StateScheduled || !got.Due.Truncate(time.Millisecond).Equal(mustTime(t, open.Timer.DueAt)) || string(got.Payload) != "v1" {
			t.Fatalf("the open window's timer: %+v, %v; exported %+v", got, err, open.Timer)
		}
		if got, err := other.q.Get(t.Context(), done.Timer.ID); err != nil || got.State != queue.StateFired {
			t.Fatalf("the fired window's timer: %+v, %v", got, err)
		}
		pushed := decode[debounceJSON](t, other.ok("-o", "json", "debounce", "cart-7", "--delay", "3h", "--max-wait", "3h", "-p", "v2").stdout)
		if pushed.Outcome != "capped" || pushed.Timer.ID != open.Timer.ID || pushed.DeadlineAt != open.DeadlineAt {
			t.Fatalf("a call after the import: %+v, want the restored window capped at %s", pushed, open.DeadlineAt)
		}
		// Again: every line exists, nothing changes.
		r = other.runCtx(t.Context(), export, "-o", "json", "import", "-")
		if r.code != 0 || fmt.Sprint(decode[importResult](t, r.stdout)) != fmt.Sprint(importResult{Existing: 3, RejectedLines: []int{}}) {
			t.Fatalf("second import: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
		}
	})
}

// TestDebounceWindowRoundTripKeepsMeta: a debounce window opened with an
// owner and labels (under the owner's epoch 2) is exported with them, and
// import restores them: Get reports the same owner, labels, epoch and
// deadline in the other namespace, whose owner is then at the timer's
// epoch. Before, import restored the window's timer without them.
func TestDebounceWindowRoundTripKeepsMeta(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		c := newCLI(t, b)
		ctx := t.Context()
		for range 2 {
			if _, err := c.q.BumpEpoch(ctx, "wf", queue.BumpOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		labels := map[string]string{"kind": "digest"}
		open, err := c.q.Debounce(ctx, "mail", queue.DebounceOptions{Delay: time.Hour, MaxWait: 2 * time.Hour, Owner: "wf", Labels: labels})
		if err != nil {
			t.Fatal(err)
		}
		before, err := c.q.Get(ctx, open.Timer.ID)
		if err != nil || before.Owner != "wf" || before.Epoch != 2 {
			t.Fatalf("the window's timer: %+v, %v", before, err)
		}
		export := c.ok("export").stdout
		if !strings.Contains(export, `"owner":"wf"`) || !strings.Contains(export, `"debounce":{"deadline_at":"`) {
			t.Fatalf("export does not carry the window's owner:\n%s", export)
		}
		other := newCLI(t, b)
		if r := other.runCtx(ctx, export, "-o", "json", "import", "-"); r.code != 0 {
			t.Fatalf("import: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
		}
		after, err := other.q.Get(ctx, open.Timer.ID)
		if err != nil || after.Owner != before.Owner || after.Epoch != before.Epoch || fmt.Sprint(after.Labels) != fmt.Sprint(before.Labels) ||
			!after.Deadline.Equal(before.Deadline) {
			t.Fatalf("after the round trip: %+v, %v; before: %+v", after, err, before)
		}
		if e, err := other.q.Epoch(ctx, "wf"); err != nil || e != 2 {
			t.Fatalf("owner wf's epoch after the import: %d, %v; want 2", e, err)
		}
	})
}

// TestDebounceDeliver: --deliver names the endpoint the window's fire goes
// to; a name the namespace has no endpoint of is refused, writing nothing.
func TestDebounceDeliver(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		c := newCLI(t, b)
		r := c.run("debounce", "inv-1", "--delay", "1h", "--max-wait", "2h", "--deliver", "billing")
		if r.code == 0 || !strings.Contains(r.stderr, `"billing"`) || r.stdout != "" {
			t.Fatalf("to a missing endpoint: exit %d, stderr %q", r.code, r.stderr)
		}
		if keys := c.keys(); len(keys) != 0 {
			t.Fatalf("the refused call wrote keys: %v", keys)
		}
		if _, err := c.q.Endpoints().Put(t.Context(), queue.Endpoint{Name: "billing", URL: "https://billing.example.com/",
			Secrets: []queue.Secret{queue.Secret(queue.SecretPrefix + "QUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUE=")}}, nil); err != nil {
			t.Fatal(err)
		}
		res := decode[debounceJSON](t, c.ok("-o", "json", "debounce", "inv-1", "--delay", "1h", "--max-wait", "2h", "--deliver", "billing").stdout)
		deliveries := keyspace.Shard(c.q.Namespace(), 0, 1).Deliveries()
		if ep, err := b.Client.HGet(t.Context(), deliveries, res.Timer.ID).Result(); err != nil || ep != "billing" {
			t.Fatalf("the window's timer delivers to %q (%v), want billing", ep, err)
		}
	})
}
