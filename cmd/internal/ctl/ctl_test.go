package ctl_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/timerq/timerq/cmd/internal/ctl"
	"github.com/timerq/timerq/internal/keyspace"
	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/queue"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(redistest.Shared(m)) }

// cli drives timerctl in-process against one backend and namespace.
type cli struct {
	t   *testing.T
	b   *redistest.Backend
	url string
	ns  string
	q   *queue.Queue // the same namespace, for claiming and checking
	now func() time.Time
}

func newCLI(t *testing.T, b *redistest.Backend) *cli {
	t.Helper()
	url := ""
	if b.Mini != nil {
		url = "redis://" + b.Mini.Addr() + "/0"
	} else {
		url = b.Real.URL()
	}
	ns := redistest.Namespace(t)
	q, err := queue.New(b.Client, queue.Options{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Close() })
	return &cli{t: t, b: b, url: url, ns: ns, q: q}
}

type result struct {
	code           int
	stdout, stderr string
}

// run runs timerctl with the global flags of the test's Redis and
// namespace, then args.
func (c *cli) run(args ...string) result {
	return c.runCtx(context.Background(), "", args...)
}

func (c *cli) runCtx(ctx context.Context, stdin string, args ...string) result {
	c.t.Helper()
	var out, errOut bytes.Buffer
	full := append([]string{"timerctl", "--redis", c.url, "--namespace", c.ns}, args...)
	code := ctl.Run(ctx, full, ctl.Options{
		Stdin: strings.NewReader(stdin), Stdout: &out, Stderr: &errOut, Now: c.now, Version: "v0.0.0-test",
	})
	return result{code, out.String(), errOut.String()}
}

// ok runs args and fails the test unless they exit 0.
func (c *cli) ok(args ...string) result {
	c.t.Helper()
	r := c.run(args...)
	if r.code != 0 {
		c.t.Fatalf("timerctl %q: exit %d, stderr %q", args, r.code, r.stderr)
	}
	return r
}

// timerJSON is the documented JSON schema of a timer (docs/timerctl.md).
type timerJSON struct {
	ID          string  `json:"id"`
	State       string  `json:"state"`
	DueAt       string  `json:"due_at"`
	CreatedAt   *string `json:"created_at"`
	FiredAt     *string `json:"fired_at"`
	CancelledAt *string `json:"cancelled_at"`
	Payload     []byte  `json:"payload"`
	Created     *bool   `json:"created"`
}

func decode[T any](t *testing.T, s string) T {
	t.Helper()
	var v T
	dec := json.NewDecoder(strings.NewReader(s))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("output is not the documented JSON: %v\n%s", err, s)
	}
	return v
}

// keys lists the keys of the namespace; on a Cluster, of every master,
// since KEYS goes to one node only.
func (c *cli) keys() []string {
	c.t.Helper()
	ctx := context.Background()
	pattern := keyspace.Namespace(c.ns).Pattern()
	cc, ok := c.b.Client.(*redis.ClusterClient)
	if !ok {
		keys, err := c.b.Client.Keys(ctx, pattern).Result()
		if err != nil {
			c.t.Fatal(err)
		}
		return keys
	}
	var keys []string
	var mu sync.Mutex
	err := cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		ks, err := m.Keys(ctx, pattern).Result()
		mu.Lock()
		defer mu.Unlock()
		keys = append(keys, ks...)
		return err
	})
	if err != nil {
		c.t.Fatal(err)
	}
	return keys
}

func (c *cli) claim() []queue.Fired {
	c.t.Helper()
	res, err := c.q.Engine().Claim(context.Background(), queue.MaxBatch)
	if err != nil {
		c.t.Fatal(err)
	}
	return res.Fired
}

func mustTime(t *testing.T, s string) time.Time {
	t.Helper()
	tm, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatalf("time %q: %v", s, err)
	}
	if !strings.HasSuffix(s, "Z") || len(s) != len("2006-01-02T15:04:05.000Z") {
		t.Fatalf("time %q is not RFC 3339 UTC with milliseconds", s)
	}
	return tm
}

func TestScheduleIsIdempotentAndGetShowsIt(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		c := newCLI(t, b)
		due := time.Now().Add(time.Hour).UTC().Truncate(time.Millisecond)
		r := c.ok("-o", "json", "schedule", "order-1", "--at", due.Format(time.RFC3339Nano), "--payload", "expire")
		first := decode[timerJSON](t, r.stdout)
		if first.ID != "order-1" || first.State != "scheduled" || first.Created == nil || !*first.Created {
			t.Fatalf("first schedule: %+v", first)
		}
		if got := mustTime(t, first.DueAt); !got.Equal(due) {
			t.Fatalf("due_at %v, want %v", got, due)
		}
		if first.FiredAt != nil || first.CancelledAt != nil || first.CreatedAt == nil || string(first.Payload) != "expire" {
			t.Fatalf("first schedule: %+v", first)
		}

		// Again, with another due time and payload: the timer is left as it
		// was, the output says so, and it still exits 0.
		r = c.ok("schedule", "order-1", "--in", "5m", "--payload", "other", "-o", "json")
		again := decode[timerJSON](t, r.stdout)
		if again.Created == nil || *again.Created || again.DueAt != first.DueAt || string(again.Payload) != "expire" {
			t.Fatalf("second schedule changed the timer or hid it: %+v", again)
		}
		r = c.ok("schedule", "order-1", "--in", "5m")
		if !strings.Contains(r.stdout, "already existed") {
			t.Fatalf("table output does not say the timer existed:\n%s", r.stdout)
		}

		got := decode[timerJSON](t, c.ok("get", "order-1", "-o", "json").stdout)
		if got.Created != nil {
			t.Fatalf("get printed \"created\", which belongs to schedule only: %s", c.ok("get", "order-1", "-o", "json").stdout)
		}
		if got.DueAt != first.DueAt || got.State != "scheduled" {
			t.Fatalf("get: %+v", got)
		}
	})
}

func TestSchedulePayloadFromFileAndStdin(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		c := newCLI(t, b)
		path := filepath.Join(t.TempDir(), "p.bin")
		bin := []byte{0, 1, 2, 0xff}
		if err := os.WriteFile(path, bin, 0o600); err != nil {
			t.Fatal(err)
		}
		got := decode[timerJSON](t, c.ok("-o", "json", "schedule", "f", "--in", "1h", "--payload-file", path).stdout)
		if !bytes.Equal(got.Payload, bin) {
			t.Fatalf("payload %x, want %x", got.Payload, bin)
		}
		// Binary payloads show as their length in tables.
		if out := c.ok("get", "f").stdout; !strings.Contains(out, "<4 bytes: 000102ff>") {
			t.Fatalf("table shows a binary payload as text:\n%s", out)
		}
		r := c.runCtx(context.Background(), "from stdin", "-o", "json", "schedule", "s", "--in", "1h", "--payload-file", "-")
		if r.code != 0 || string(decode[timerJSON](t, r.stdout).Payload) != "from stdin" {
			t.Fatalf("stdin payload: exit %d %q %q", r.code, r.stdout, r.stderr)
		}
	})
}

// TestBadInputWritesNothing: every usage error gets exit 2, one line on
// stderr saying what is wrong and what to do, nothing on stdout, and no
// key in Redis.
func TestBadInputWritesNothing(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		c := newCLI(t, b)
		long := strings.Repeat("x", 300)
		big := filepath.Join(t.TempDir(), "big")
		if err := os.WriteFile(big, make([]byte, 2<<20), 0o600); err != nil {
			t.Fatal(err)
		}
		cases := []struct {
			args []string
			want string
		}{
			{[]string{"schedule", "a", "--at", "next tuesday"}, `--at "next tuesday" is not a time: use RFC 3339`},
			{[]string{"schedule", "a", "--at", "1796238000"}, `--at "1796238000" is a number without a unit: write 1796238000s for Unix seconds (2026-12-02T19:00:00.000Z) or 1796238000ms for Unix milliseconds (1970-01-21T18:57:18.000Z)`},
			{[]string{"schedule", "a", "--at", "1796238000000"}, `1796238000000ms for Unix milliseconds (2026-12-02T19:00:00.000Z)`},
			{[]string{"schedule", "a", "--at", "-5s"}, `--at "-5s" is not a time`},
			{[]string{"schedule", "a", "--at", "99999999999999s"}, `is outside 1970-01-01 to 9999-12-31`},
			{[]string{"reschedule", "a", "--at", "1796238000"}, `is a number without a unit`},
			{[]string{"list", "--due-to", "1796238000"}, `--due-to "1796238000" is a number without a unit`},
			{[]string{"schedule", "a", "--in", "-5s"}, `--in "-5s" is negative`},
			{[]string{"schedule", "a", "--in", "soon"}, `--in "soon" is not a duration`},
			{[]string{"schedule", "a", "--in", "5s", "--at", "2030-01-01T00:00:00Z"}, "both --at and --in are given: give one of them"},
			{[]string{"schedule", "a"}, "missing the due time: give --at TIME or --in DURATION"},
			{[]string{"schedule", "--in", "5s"}, "missing the timer ID"},
			{[]string{"schedule", long, "--in", "5s"}, "invalid timer ID"},
			{[]string{"schedule", "a", "--in", "5s", "--payload-file", "/does/not/exist"}, `--payload-file "/does/not/exist" does not exist`},
			{[]string{"schedule", "a", "b", "--in", "5s"}, "too many arguments"},
			{[]string{"schedule", "a", "--in", "5s", "--payload", strings.Repeat("p", 70<<10)}, "--payload is 71680 bytes, over the payload limit of 65536 bytes"},
			{[]string{"schedule", "a", "--in", "5s", "--payload-file", big}, "--payload-file " + big + " is 2097152 bytes, over the payload limit of 65536 bytes"},
			{[]string{"--timeout", "5", "get", "a"}, `--timeout "5" is not a duration: give it a unit, e.g. --timeout 5s`},
			{[]string{"wait", "a", "--timeout", "5"}, `--timeout "5" is not a duration: give it a unit, e.g. --timeout 5s`},
			{[]string{"list", "--limit", "ten"}, `--limit "ten" is not a whole number`},
			{[]string{"schedule", "a", "--in", "5s", "--payload", "x", "--payload-file", "-"}, "both --payload and --payload-file are given"},
			{[]string{"schedule", "a", "--in", "5s", "--bogus"}, "flag provided but not defined: -bogus"},
			{[]string{"--namespace", "bad ns", "schedule", "a", "--in", "5s"}, "namespace"},
			{[]string{"-o", "yaml", "schedule", "a", "--in", "5s"}, `--output "yaml" is not a format`},
			{[]string{"frobnicate"}, `unknown command "frobnicate"`},
			{[]string{"list", "--state", "done"}, `--state "done" is not a state`},
			{[]string{"list", "--limit", "0"}, "--limit 0 is outside 1-1000"},
			{[]string{"list", "--cursor", "garbage"}, "is not a cursor"},
			{[]string{"list", "--due-from", "yesterday"}, `--due-from "yesterday" is not a time`},
			{[]string{"reschedule", "a"}, "missing the due time"},
			{[]string{"wait", "a", "--timeout", "-1s"}, "negative"},
			{[]string{"completion", "fish"}, `no completion for shell "fish"`},
			{[]string{"-n", "a", "list", "-n", "b"}, "--namespace (or -n) is given more than once: give it once"},
			{[]string{"list", "--limit", "5", "--limit", "10"}, "--limit is given more than once"},
			{[]string{"schedule", "a", "--in", "5s", "-p", "x", "--in", "10s"}, "--in is given more than once"},
			{[]string{"list", "--due-from", "2026-12-03T00:00:00Z", "--due-to", "2026-12-02T00:00:00Z"}, "--due-from 2026-12-03T00:00:00Z is after --due-to 2026-12-02T00:00:00Z: swap them"},
		}
		for _, tc := range cases {
			r := c.run(tc.args...)
			if r.code != ctl.ExitUsage {
				t.Errorf("%q: exit %d, want %d (stderr %q)", tc.args, r.code, ctl.ExitUsage, r.stderr)
			}
			if !strings.HasPrefix(r.stderr, "timerctl: ") || !strings.Contains(r.stderr, tc.want) || strings.Count(r.stderr, "\n") != 1 {
				t.Errorf("%q: stderr %q, want one line with %q", tc.args, r.stderr, tc.want)
			}
			if strings.Count(r.stderr, ": ") < 2 {
				t.Errorf("%q: stderr %q does not say what to do", tc.args, r.stderr)
			}
			// A single schedule is no batch, and timerctl has no Go options.
			if strings.Contains(r.stderr, "batch item") || strings.Contains(r.stderr, "Options.") {
				t.Errorf("%q: stderr %q speaks of the Go API", tc.args, r.stderr)
			}
			if r.stdout != "" {
				t.Errorf("%q: wrote to stdout: %q", tc.args, r.stdout)
			}
		}
		if keys := c.keys(); len(keys) != 0 {
			t.Fatalf("bad input wrote keys: %v", keys)
		}
	})
}

func TestNotFound(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		c := newCLI(t, b)
		for _, args := range [][]string{
			{"get", "nope"}, {"cancel", "nope"}, {"fire", "nope"},
			{"reschedule", "nope", "--in", "1m"}, {"wait", "nope", "--timeout", "1s"},
		} {
			r := c.run(args...)
			if r.code != ctl.ExitNotFound || !strings.Contains(r.stderr, `"nope"`) || !strings.Contains(r.stderr, "check the ID") {
				t.Errorf("%q: exit %d, stderr %q; want %d naming the ID and what to do", args, r.code, r.stderr, ctl.ExitNotFound)
			}
		}
		if keys := c.keys(); len(keys) != 0 {
			t.Fatalf("not-found commands wrote keys: %v", keys)
		}
	})
}

func TestCancelRescheduleFireAndConflicts(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		c := newCLI(t, b)
		c.ok("schedule", "a", "--in", "1h")
		c.ok("schedule", "b", "--in", "1h")

		// reschedule moves the due time.
		at := time.Now().Add(2 * time.Hour).UTC().Truncate(time.Millisecond)
		got := decode[timerJSON](t, c.ok("-o", "json", "reschedule", "a", "--at", fmt.Sprintf("%dms", at.UnixMilli())).stdout)
		if !mustTime(t, got.DueAt).Equal(at) || got.State != "scheduled" {
			t.Fatalf("reschedule --at ms: %+v, want due %v", got, at)
		}
		got = decode[timerJSON](t, c.ok("-o", "json", "reschedule", "a", "--at", fmt.Sprintf("%ds", at.Unix())).stdout)
		if !mustTime(t, got.DueAt).Equal(at.Truncate(time.Second)) {
			t.Fatalf("reschedule --at s: %+v, want due %v", got, at.Truncate(time.Second))
		}

		// cancel, and cancel again: idempotent.
		got = decode[timerJSON](t, c.ok("-o", "json", "cancel", "b").stdout)
		if got.State != "cancelled" || got.CancelledAt == nil {
			t.Fatalf("cancel: %+v", got)
		}
		c.ok("cancel", "b")
		r := c.run("reschedule", "b", "--in", "1m")
		if r.code != ctl.ExitConflict || !strings.Contains(r.stderr, "cancelled") {
			t.Fatalf("reschedule of a cancelled timer: exit %d %q, want %d", r.code, r.stderr, ctl.ExitConflict)
		}

		// fire makes a due now; a claim fires it.
		got = decode[timerJSON](t, c.ok("-o", "json", "fire", "a").stdout)
		if got.State != "scheduled" || !mustTime(t, got.DueAt).Before(time.Now().Add(time.Second)) {
			t.Fatalf("fire: %+v, want scheduled and due now", got)
		}
		if fired := c.claim(); len(fired) != 1 || fired[0].ID != "a" {
			t.Fatalf("claim after fire: %+v", fired)
		}
		got = decode[timerJSON](t, c.ok("-o", "json", "get", "a").stdout)
		if got.State != "fired" || got.FiredAt == nil {
			t.Fatalf("get after firing: %+v", got)
		}
		for _, args := range [][]string{{"cancel", "a"}, {"reschedule", "a", "--in", "1m"}, {"fire", "a"}} {
			r := c.run(args...)
			if r.code != ctl.ExitConflict || !strings.Contains(r.stderr, "fired") {
				t.Errorf("%q on a fired timer: exit %d %q, want %d", args, r.code, r.stderr, ctl.ExitConflict)
			}
		}
		// The conflicts changed nothing.
		if again := decode[timerJSON](t, c.ok("-o", "json", "get", "a").stdout); again.FiredAt == nil || *again.FiredAt != *got.FiredAt {
			t.Fatalf("a conflict changed the fired timer: %+v", again)
		}
	})
}

func TestWait(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		c := newCLI(t, b)
		c.ok("schedule", "soon", "--in", "200ms")
		done := make(chan result, 1)
		go func() { done <- c.run("-o", "json", "wait", "soon", "--timeout", "20s") }()
		deadline := time.Now().Add(10 * time.Second)
		var r result
	claiming:
		for {
			c.claim()
			select {
			case r = <-done:
				break claiming
			case <-time.After(20 * time.Millisecond):
			}
			if time.Now().After(deadline) {
				t.Fatal("wait did not return after the timer fired")
			}
		}
		if r.code != 0 {
			t.Fatalf("wait: exit %d %q", r.code, r.stderr)
		}
		if got := decode[timerJSON](t, r.stdout); got.State != "fired" || got.FiredAt == nil {
			t.Fatalf("wait printed %+v, want the fired timer", got)
		}
		if out := c.ok("get", "soon").stdout; !strings.Contains(out, "\nlate ") || !strings.Contains(out, "ms\n") {
			t.Fatalf("a fired timer's table does not show its lateness in ms:\n%s", out)
		}
		// A fired timer: at once.
		if r := c.run("wait", "soon", "--timeout", "1ms"); r.code != 0 {
			t.Fatalf("wait on a fired timer: exit %d %q", r.code, r.stderr)
		}

		// Timeout: exit 5.
		c.ok("schedule", "later", "--in", "1h")
		r = c.run("wait", "later", "--timeout", "300ms")
		if r.code != ctl.ExitTimeout || !strings.Contains(r.stderr, "did not fire within 300ms") || r.stdout != "" {
			t.Fatalf("wait timeout: exit %d %q %q, want %d", r.code, r.stdout, r.stderr, ctl.ExitTimeout)
		}

		// Cancelled while waiting: exit 4.
		go func() { done <- c.run("wait", "later", "--timeout", "20s") }()
		// Cancel once the wait has subscribed, so its wakeup is what ends it.
		ch := c.q.Keys().Timer("later")
		redistest.Eventually(t, 10*time.Second, "wait to subscribe", func() bool {
			n, err := b.Client.PubSubNumSub(context.Background(), ch).Result()
			return err == nil && n[ch] > 0
		})
		// Not through timerctl: urfave/cli v2 shares its help flag between
		// apps, so two Runs in one process race.
		if _, err := c.q.Cancel(context.Background(), "later"); err != nil {
			t.Fatal(err)
		}
		select {
		case r = <-done:
		case <-time.After(15 * time.Second):
			t.Fatal("wait did not return after the timer was cancelled")
		}
		if r.code != ctl.ExitConflict || !strings.Contains(r.stderr, "cancelled") {
			t.Fatalf("wait on a cancelled timer: exit %d %q, want %d", r.code, r.stderr, ctl.ExitConflict)
		}
	})
}

func TestListPagesByDueTime(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		c := newCLI(t, b)
		base := time.Now().Add(time.Hour).UTC().Truncate(time.Millisecond)
		// Scheduled out of due order.
		for _, i := range []int{3, 0, 4, 1, 2} {
			c.ok("schedule", fmt.Sprintf("t%d", i), "--at", base.Add(time.Duration(i)*time.Minute).Format(time.RFC3339Nano))
		}
		c.ok("cancel", "t4")

		var ids []string
		cursor := ""
		for pages := 0; ; pages++ {
			args := []string{"-o", "json", "list", "--limit", "2", "--state", "scheduled"}
			if cursor != "" {
				args = append(args, "--cursor", cursor)
			}
			r := c.ok(args...)
			page := decode[[]timerJSON](t, r.stdout)
			for _, tm := range page {
				ids = append(ids, tm.ID)
			}
			cursor = strings.TrimSpace(strings.TrimPrefix(r.stderr, "next cursor: "))
			if cursor == "" {
				break
			}
			if pages > 5 {
				t.Fatal("list does not end")
			}
		}
		if got := strings.Join(ids, ","); got != "t0,t1,t2,t3" {
			t.Fatalf("list pages: %s, want t0,t1,t2,t3", got)
		}

		// Table: aligned columns, a relative time, and the command for more.
		c.now = func() time.Time { return base.Add(-4*time.Minute - 12*time.Second) }
		r := c.ok("list", "--limit", "2")
		lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
		if !strings.HasPrefix(lines[0], "ID ") || !strings.Contains(lines[1], "in 4m12s") {
			t.Fatalf("table:\n%s", r.stdout)
		}
		if col := strings.Index(lines[0], "STATE"); col < 0 || strings.Index(lines[1], "scheduled") != col {
			t.Fatalf("columns are not aligned:\n%s", r.stdout)
		}
		if !strings.Contains(r.stdout, "more: timerctl -n "+c.ns+" list --limit 2 --cursor ") {
			t.Fatalf("table does not say how to get the next page:\n%s", r.stdout)
		}
		// The hint reproduces the query: the namespace, filters and page
		// size, so that running it prints the next page of the same list.
		c.ok("schedule", "t9", "--at", base.Add(10*time.Minute).Format(time.RFC3339Nano)) // past --due-to
		r = c.ok("list", "--state", "scheduled", "--due-to", base.Add(3*time.Minute).Format(time.RFC3339Nano), "--limit", "3")
		_, more, ok := strings.Cut(r.stdout, "more: timerctl ")
		if !ok {
			t.Fatalf("no more: hint:\n%s", r.stdout)
		}
		more = strings.TrimSpace(more)
		if strings.ContainsAny(more, `'"\`) {
			t.Fatalf("the hint %q needs a shell to split; this test splits on spaces", more)
		}
		var nextOut, nextErr bytes.Buffer
		code := ctl.Run(context.Background(), append([]string{"timerctl", "--redis", c.url}, strings.Fields(more)...),
			ctl.Options{Stdout: &nextOut, Stderr: &nextErr, Now: c.now})
		next := result{code, nextOut.String(), nextErr.String()}
		if code != 0 {
			t.Fatalf("the more: command %q: exit %d %s", more, code, nextErr.String())
		}
		if rows := strings.Split(strings.TrimSpace(next.stdout), "\n"); len(rows) != 2 || !strings.HasPrefix(rows[1], "t3 ") {
			t.Fatalf("the more: command %q printed\n%s\nwant the one remaining scheduled timer t3", more, next.stdout)
		}
		// Due range.
		r = c.ok("-o", "json", "list", "--due-from", base.Add(time.Minute).Format(time.RFC3339), "--due-to", base.Add(2*time.Minute).Format(time.RFC3339Nano))
		if page := decode[[]timerJSON](t, r.stdout); len(page) != 2 || page[0].ID != "t1" || page[1].ID != "t2" {
			t.Fatalf("due range: %+v", page)
		}
		// An empty list is an empty array, not null.
		if r := c.ok("-o", "json", "list", "--state", "fired"); strings.TrimSpace(r.stdout) != "[]" {
			t.Fatalf("empty list: %q", r.stdout)
		}
	})
}

func TestStats(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		c := newCLI(t, b)
		past := time.Now().Add(-3 * time.Hour).UTC().Format(time.RFC3339)
		c.ok("schedule", "overdue", "--at", past)
		c.ok("schedule", "m", "--in", "30s")
		c.ok("schedule", "h1", "--in", "30m")
		c.ok("schedule", "h2", "--in", "31m")
		c.ok("schedule", "far", "--in", "2000h")
		c.ok("schedule", "x", "--in", "1h")
		c.ok("cancel", "x")

		type stats struct {
			Now              string `json:"now"`
			Scheduled        int64  `json:"scheduled"`
			Fired            int64  `json:"fired"`
			Cancelled        int64  `json:"cancelled"`
			EarliestDue      string `json:"earliest_due"`
			Overdue          int64  `json:"overdue"`
			OldestOverdueAge int64  `json:"oldest_overdue_age_ms"`
			DueHistogram     []struct {
				Bucket string `json:"bucket"`
				Count  int64  `json:"count"`
			} `json:"due_histogram"`
			DueWithin []struct {
				Within string `json:"within"`
				Count  int64  `json:"count"`
			} `json:"due_within"`
			Shards []struct {
				Shard            int     `json:"shard"`
				Now              string  `json:"now"`
				Scheduled        int64   `json:"scheduled"`
				Fired            int64   `json:"fired"`
				Cancelled        int64   `json:"cancelled"`
				Overdue          int64   `json:"overdue"`
				EarliestDue      *string `json:"earliest_due"`
				OldestOverdueAge int64   `json:"oldest_overdue_age_ms"`
			} `json:"shards"`
			Workers struct {
				Serving    int      `json:"serving"`
				Live       []string `json:"live"`
				LastSeenAt *string  `json:"last_seen_at"`
				LastWorker string   `json:"last_worker"`
				LastLeft   bool     `json:"last_left"`
			} `json:"workers"`
			Quotas map[string]struct {
				Limit int64 `json:"limit"`
				Usage int64 `json:"usage"`
			} `json:"quotas"`
		}
		st := decode[stats](t, c.ok("-o", "json", "stats").stdout)
		if st.Scheduled != 5 || st.Cancelled != 1 || st.Fired != 0 || st.Overdue != 1 {
			t.Fatalf("stats counts: %+v", st)
		}
		if len(st.Shards) != 1 || st.Shards[0].Scheduled != 5 || st.Shards[0].Overdue != 1 {
			t.Fatalf("per-shard stats of an unsharded namespace: %+v", st.Shards)
		}
		if age := time.Duration(st.OldestOverdueAge) * time.Millisecond; age < 3*time.Hour || age > 3*time.Hour+time.Minute {
			t.Fatalf("oldest overdue age %v, want about 3h", age)
		}
		if !mustTime(t, st.EarliestDue).Before(time.Now().Add(-time.Hour)) {
			t.Fatalf("earliest due %s is not the overdue timer's", st.EarliestDue)
		}
		var hist []string
		for _, h := range st.DueHistogram {
			hist = append(hist, fmt.Sprintf("%s=%d", h.Bucket, h.Count))
		}
		if got := strings.Join(hist, " "); got != "overdue=1 next minute=1 next hour=2 next day=0 next week=0 later=1" {
			t.Fatalf("histogram: %s", got)
		}
		var within []string
		for _, w := range st.DueWithin {
			within = append(within, fmt.Sprintf("%s=%d", w.Within, w.Count))
		}
		if got := strings.Join(within, " "); got != "overdue=1 1m=2 1h=4 1d=4 1w=4" {
			t.Fatalf("due within (cumulative): %s", got)
		}
		out := c.ok("stats").stdout
		if !strings.Contains(out, "oldest due 3h ago") || !strings.Contains(out, "█") {
			t.Fatalf("table stats:\n%s", out)
		}
		for _, line := range strings.Split(out, "\n") {
			if strings.HasPrefix(line, "next hour") && strings.Count(line, "█") != 40 {
				t.Fatalf("the fullest bucket should draw the longest bar:\n%s", out)
			}
		}
	})
}

func TestImportExport(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		c := newCLI(t, b)
		due := time.Now().Add(time.Hour).UTC().Truncate(time.Millisecond)
		input := strings.Join([]string{
			fmt.Sprintf(`{"id":"a","due_at":%q,"payload":%q}`, due.Format(time.RFC3339Nano), base64.StdEncoding.EncodeToString([]byte("pa"))),
			fmt.Sprintf(`{"id":"b","due_at":"%dms","payload_text":"pb"}`, due.Add(time.Minute).UnixMilli()),
			`{"id":"c","in":"2h"}`,
			`{"id":"broken",`,
			``,
			`{"id":"d","in":"-5s"}`,
			`{"id":"e","due_at":"tomorrow"}`,
			`{"id":"f"}`,
			`{"id":"g","in":"1m","due":"x"}`,
			`{"id":"c","in":"9h"}`,
		}, "\n") + "\n"
		path := filepath.Join(t.TempDir(), "in.jsonl")
		if err := os.WriteFile(path, []byte(input), 0o600); err != nil {
			t.Fatal(err)
		}
		r := c.run("-o", "json", "import", path)
		if r.code != ctl.ExitUsage {
			t.Fatalf("import with bad lines: exit %d, want %d; %q", r.code, ctl.ExitUsage, r.stderr)
		}
		type report struct {
			Created       int   `json:"created"`
			Existing      int   `json:"existing"`
			Rejected      int   `json:"rejected"`
			RejectedLines []int `json:"rejected_lines"`
			// Schedule lines restored or left as they were.
			SchedulesCreated  int `json:"schedules_created"`
			SchedulesExisting int `json:"schedules_existing"`
			// Quarantined lines put in the quarantine.
			Quarantined int `json:"quarantined"`
		}
		rep := decode[report](t, r.stdout)
		if rep.Created != 3 || rep.Existing != 1 || rep.Rejected != 5 || fmt.Sprint(rep.RejectedLines) != "[4 6 7 8 9]" {
			t.Fatalf("import report: %+v", rep)
		}
		for _, n := range []int{4, 6, 7, 8, 9} {
			if !strings.Contains(r.stderr, fmt.Sprintf("timerctl: line %d: ", n)) {
				t.Errorf("stderr does not report line %d:\n%s", n, r.stderr)
			}
		}
		if strings.Contains(r.stderr, "line 5:") || strings.Contains(r.stderr, "line 10:") {
			t.Errorf("stderr reports a good or blank line:\n%s", r.stderr)
		}

		// Import again from stdin: everything exists now.
		r = c.runCtx(context.Background(), input, "import", "-")
		if !strings.Contains(r.stdout, "created 0, existing 4, rejected 5") {
			t.Fatalf("re-import: %q", r.stdout)
		}

		// export prints what import accepts, in due order; importing it
		// into another namespace reproduces the timers.
		exp := c.ok("export").stdout
		lines := strings.Split(strings.TrimSpace(exp), "\n")
		if len(lines) != 3 || !strings.Contains(lines[0], `"id":"a"`) || !strings.Contains(lines[2], `"id":"c"`) {
			t.Fatalf("export:\n%s", exp)
		}
		other := newCLI(t, b)
		r = other.runCtx(context.Background(), exp, "import")
		if r.code != 0 || !strings.Contains(r.stdout, "created 3, existing 0, rejected 0") {
			t.Fatalf("import of an export: exit %d %q %q", r.code, r.stdout, r.stderr)
		}
		for _, id := range []string{"a", "b", "c"} {
			x := decode[timerJSON](t, c.ok("-o", "json", "get", id).stdout)
			y := decode[timerJSON](t, other.ok("-o", "json", "get", id).stdout)
			if x.DueAt != y.DueAt || !bytes.Equal(x.Payload, y.Payload) {
				t.Errorf("%s: exported %+v, re-imported %+v", id, x, y)
			}
		}
		if got := decode[timerJSON](t, other.ok("-o", "json", "get", "b").stdout); string(got.Payload) != "pb" {
			t.Errorf("payload_text did not round-trip: %q", got.Payload)
		}

		// A missing file is a usage error that writes nothing.
		third := newCLI(t, b)
		r = third.run("import", "/does/not/exist.jsonl")
		if r.code != ctl.ExitUsage || !strings.Contains(r.stderr, "does not exist") || len(third.keys()) != 0 {
			t.Fatalf("import of a missing file: exit %d %q", r.code, r.stderr)
		}
	})
}

func TestImportShowsProgressOnATerminal(t *testing.T) {
	m, _ := redistest.Mini(t)
	var in strings.Builder
	for i := range 1200 {
		fmt.Fprintf(&in, `{"id":"t%d","in":"1h"}`+"\n", i)
	}
	var out, errOut bytes.Buffer
	code := ctl.Run(context.Background(), []string{"timerctl", "--redis", "redis://" + m.Addr(), "import"}, ctl.Options{
		Stdin: strings.NewReader(in.String()), Stdout: &out, Stderr: &errOut,
		IsTerminal: func(w io.Writer) bool { return w == &errOut },
	})
	if code != 0 || !strings.Contains(out.String(), "created 1200") {
		t.Fatalf("import: exit %d %q %q", code, out.String(), errOut.String())
	}
	if !strings.Contains(errOut.String(), "\r1200 lines") {
		t.Fatalf("no progress on a terminal: %q", errOut.String())
	}
}

// TestWatchFollowsFiresUntilInterrupted also runs on a namespace of 4
// shards, where the two fires are in different shards' streams.
func TestWatchFollowsFiresUntilInterrupted(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		for _, shards := range []int{1, 4} {
			t.Run(fmt.Sprint("shards=", shards), func(t *testing.T) { testWatch(t, b, shards) })
		}
	})
}

func testWatch(t *testing.T, b *redistest.Backend, shards int) {
	c := newCLI(t, b)
	if _, err := queue.CreateNamespace(context.Background(), b.Client, c.ns, shards); err != nil {
		t.Fatal(err)
	}
	k1, _ := c.q.Inspect().ShardOf(context.Background(), "w1")
	k2, _ := c.q.Inspect().ShardOf(context.Background(), "w2")
	if shards > 1 && k1 == k2 {
		t.Fatal("w1 and w2 are in one shard; pick IDs in two")
	}
	// A fire from before watch started is not shown. It must have fired
	// before watch starts: a claim in the millisecond "old" was scheduled
	// in would find nothing (due times round up), and "old" would then
	// fire with w1 and w2 below.
	old := decode[timerJSON](t, c.ok("-o", "json", "schedule", "old", "--in", "0s").stdout)
	// -o json shows the due time's millisecond; the due time may have µs.
	redistest.AwaitServerTime(t, b.Client, mustTime(t, old.DueAt).Add(time.Millisecond))
	if fired := c.claim(); len(fired) != 1 || fired[0].ID != "old" {
		t.Fatalf("claim before watch fired %+v, want only old", fired)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	var out, errOut bytes.Buffer
	done := make(chan int, 1)
	watching := make(chan struct{})
	go func() {
		done <- ctl.Run(ctx, []string{"timerctl", "--redis", c.url, "--namespace", c.ns, "-o", "json", "watch"},
			ctl.Options{Stdout: lockedWriter{&mu, &out}, Stderr: lockedWriter{&mu, &errOut}, Watching: func() { close(watching) }})
	}()
	awaitWatching(t, watching, done)
	// Through the queue, not timerctl: two Runs in one process race
	// on urfave/cli's shared help flag.
	due := time.Now().Add(-time.Second)
	for i, id := range []string{"w1", "w2"} {
		p := map[string]string{"w1": "hi"}[id]
		// w2 is due 1 ms later, so it fires after w1 in the claim.
		if _, err := c.q.Schedule(context.Background(), id, due.Add(time.Duration(i)*time.Millisecond), []byte(p)); err != nil {
			t.Fatal(err)
		}
	}
	c.claim()
	redistest.Eventually(t, 10*time.Second, "watch to print two fires", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return strings.Count(out.String(), "\n") >= 2
	})
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("watch ended with exit %d on interrupt: %q", code, errOut.String())
	}
	type fire struct { // api.FireEventJSON, and lateness_ms
		ID         string `json:"id"`
		DueAt      string `json:"due_at"`
		FiredAt    string `json:"fired_at"`
		LatenessMS int64  `json:"lateness_ms"`
		Payload    []byte `json:"payload"`
		Shard      int    `json:"shard"`
		StreamID   string `json:"stream_id"`
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("watch printed %d lines, want 2 (the old fire must not show):\n%s", len(lines), out.String())
	}
	if shards > 1 && !strings.Contains(lines[0], `"id":"w1"`) {
		// Two shards fired in one millisecond: either may come first.
		lines[0], lines[1] = lines[1], lines[0]
	}
	f := decode[fire](t, lines[0])
	if f.ID != "w1" || string(f.Payload) != "hi" || f.LatenessMS < 0 || mustTime(t, f.FiredAt).Before(mustTime(t, f.DueAt)) ||
		f.StreamID == "" || f.Shard != k1 {
		t.Fatalf("watch line: %+v", f)
	}
	if f := decode[fire](t, lines[1]); f.ID != "w2" {
		t.Fatalf("second watch line: %+v, want w2", f)
	}
}

// awaitWatching returns once watch has fixed where it starts reading, and
// fails the test if watch ended first.
func awaitWatching(t *testing.T, watching <-chan struct{}, done <-chan int) {
	t.Helper()
	select {
	case <-watching:
	case code := <-done:
		t.Fatalf("watch ended with exit %d before it started watching", code)
	case <-time.After(10 * time.Second):
		t.Fatal("watch did not start within 10s")
	}
}

// TestWatchResumesAfterLosingRedis: watch outlives a Redis restart (what a
// client sees of a failover), and resumes after the last fire it printed:
// nothing twice, nothing skipped.
func TestWatchResumesAfterLosingRedis(t *testing.T) {
	srv := redistest.Start(t, redistest.Config{Args: []string{"--appendonly", "yes", "--appendfsync", "always"}})
	rdb := srv.Client(t)
	ns := redistest.Namespace(t)
	q, err := queue.New(rdb, queue.Options{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	fire := func(id string) {
		t.Helper()
		ctx := context.Background()
		// Until Redis answers again: the client reconnects after the
		// restart (Schedule is idempotent, so retrying it is safe).
		redistest.Eventually(t, 10*time.Second, "fire "+id, func() bool {
			if _, err = q.Schedule(ctx, id, time.Now().Add(-time.Second), nil); err != nil {
				return false
			}
			_, err = q.Engine().Claim(ctx, queue.MaxBatch)
			return err == nil
		})
	}
	var mu sync.Mutex
	var out, errOut bytes.Buffer
	lines := func() string { mu.Lock(); defer mu.Unlock(); return out.String() }
	stderr := func() string { mu.Lock(); defer mu.Unlock(); return errOut.String() }
	waitLines := func(n int) {
		t.Helper()
		redistest.Eventually(t, 15*time.Second, fmt.Sprintf("%d lines from watch", n), func() bool { return strings.Count(lines(), "\n") >= n })
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan int, 1)
	watching := make(chan struct{})
	go func() {
		done <- ctl.Run(ctx, []string{"timerctl", "--redis", srv.URL(), "--namespace", ns, "--timeout", "1s", "-o", "json", "watch"},
			ctl.Options{Stdout: lockedWriter{&mu, &out}, Stderr: lockedWriter{&mu, &errOut}, Watching: func() { close(watching) }})
	}()
	awaitWatching(t, watching, done)
	fire("before")
	waitLines(1)
	srv.Stop()
	redistest.Eventually(t, 15*time.Second, "watch to notice the lost Redis", func() bool { return strings.Contains(stderr(), "lost Redis") })
	select {
	case code := <-done:
		t.Fatalf("watch exited %d while Redis was down: %q", code, errOut.String())
	default:
	}
	srv.Restart()
	fire("after")
	waitLines(2)
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("watch exit %d: %q", code, errOut.String())
	}
	got := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(got) != 2 || !strings.Contains(got[0], `"id":"before"`) || !strings.Contains(got[1], `"id":"after"`) {
		t.Fatalf("watch printed:\n%s\nwant before, then after, once each", out.String())
	}
	if !strings.Contains(errOut.String(), "reconnecting, resuming after stream position") || !strings.Contains(errOut.String(), "reconnected") {
		t.Fatalf("stderr does not report the reconnection: %q", errOut.String())
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func TestRedisFailuresExitOneWithoutThePassword(t *testing.T) {
	var out, errOut bytes.Buffer
	code := ctl.Run(context.Background(), []string{"timerctl", "--redis", "redis://ops:hunter2@127.0.0.1:1/0", "--timeout", "2s", "get", "a"},
		ctl.Options{Stdout: &out, Stderr: &errOut})
	if code != ctl.ExitFailure || !strings.Contains(errOut.String(), "check that Redis is reachable") {
		t.Fatalf("unreachable Redis: exit %d %q", code, errOut.String())
	}
	if strings.Contains(errOut.String(), "hunter2") {
		t.Fatalf("the password leaked: %q", errOut.String())
	}

	// A wrong password on a real server.
	s := redistest.Start(t, redistest.Config{})
	rdb := s.Client(t)
	if err := rdb.Do(context.Background(), "ACL", "SETUSER", "ops", "on", ">right-pass", "~*", "&*", "+@all").Err(); err != nil {
		t.Fatal(err)
	}
	errOut.Reset()
	code = ctl.Run(context.Background(), []string{"timerctl", "--redis", "redis://ops:wrong-pass@" + s.Addr() + "/0", "get", "a"},
		ctl.Options{Stdout: &out, Stderr: &errOut})
	if code != ctl.ExitFailure || !strings.Contains(errOut.String(), "correct the credentials in --redis") {
		t.Fatalf("wrong password: exit %d %q", code, errOut.String())
	}
	if strings.Contains(errOut.String(), "wrong-pass") {
		t.Fatalf("the password leaked: %q", errOut.String())
	}
	errOut.Reset()
	code = ctl.Run(context.Background(), []string{"timerctl", "--redis", "redis://ops:right-pass@" + s.Addr() + "/0", "-o", "json", "schedule", "a", "--in", "1m"},
		ctl.Options{Stdout: &out, Stderr: &errOut})
	if code != 0 {
		t.Fatalf("right password: exit %d %q", code, errOut.String())
	}
	if out.Len() == 0 {
		t.Fatal("nothing printed")
	}
}

// TestBadEnvironmentValuesAreUsageErrors: a TIMERQ_* value that does not
// parse is a usage error naming the variable, the flag and an example.
func TestBadEnvironmentValuesAreUsageErrors(t *testing.T) {
	t.Setenv("TIMERQ_TIMEOUT", "5")
	var out, errOut bytes.Buffer
	code := ctl.Run(context.Background(), []string{"timerctl", "get", "a"}, ctl.Options{Stdout: &out, Stderr: &errOut})
	if want := `TIMERQ_TIMEOUT (--timeout) "5" is not a duration: give it a unit, e.g. --timeout 5s`; code != ctl.ExitUsage || !strings.Contains(errOut.String(), want) {
		t.Fatalf("exit %d %q, want 2 and %q", code, errOut.String(), want)
	}
}

func TestEnvironmentAndFlagPrecedence(t *testing.T) {
	m, _ := redistest.Mini(t)
	t.Setenv("TIMERQ_REDIS_URL", "redis://127.0.0.1:1/0")
	t.Setenv("TIMERQ_NAMESPACE", "from-env")
	t.Setenv("TIMERQ_OUTPUT", "json")
	var out, errOut bytes.Buffer
	code := ctl.Run(context.Background(), []string{"timerctl", "--redis", "redis://" + m.Addr(), "schedule", "a", "--in", "1m"},
		ctl.Options{Stdout: &out, Stderr: &errOut})
	if code != 0 {
		t.Fatalf("exit %d %q: the --redis flag should win over TIMERQ_REDIS_URL", code, errOut.String())
	}
	if decode[timerJSON](t, out.String()).ID != "a" {
		t.Fatal("TIMERQ_OUTPUT=json was not used")
	}
	if !m.Exists(keyspace.Shard("from-env", 0, 1).Timers()) {
		t.Fatalf("TIMERQ_NAMESPACE was not used; keys %v", m.Keys())
	}
}

func TestHelpVersionAndCompletion(t *testing.T) {
	var out, errOut bytes.Buffer
	o := ctl.Options{Stdout: &out, Stderr: &errOut, Version: "v1.2.3"}
	if code := ctl.Run(context.Background(), []string{"timerctl", "--help"}, o); code != 0 {
		t.Fatalf("--help: exit %d", code)
	}
	for _, want := range []string{"Exit codes:", "5  wait timed out", "schedule", "watch", "TIMERQ_REDIS_URL",
		"--tls-ca-file", "TIMERQ_TLS_CA_FILE", "--tls-cert-file", "--tls-key-file", "--tls-server-name", "--tls-insecure-skip-verify"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("--help lacks %q", want)
		}
	}
	out.Reset()
	// One line for both, the one timerworker prints (cliconf.VersionLine).
	want := "timerctl v1.2.3 (" + runtime.Version() + ")\n"
	if code := ctl.Run(context.Background(), []string{"timerctl", "version"}, o); code != 0 || out.String() != want {
		t.Fatalf("version: exit %d %q, want %q", code, out.String(), want)
	}
	out.Reset()
	if code := ctl.Run(context.Background(), []string{"timerctl", "--version"}, o); code != 0 || out.String() != want {
		t.Fatalf("--version: exit %d %q, want %q", code, out.String(), want)
	}
	out.Reset()
	if code := ctl.Run(context.Background(), []string{"timerctl", "version", "-o", "json"}, o); code != 0 {
		t.Fatalf("version -o json: exit %d", code)
	}
	if v := decode[map[string]string](t, out.String()); v["version"] != "v1.2.3" || !strings.HasPrefix(v["go"], "go") {
		t.Fatalf("version -o json: %q", out.String())
	}
	out.Reset()
	if code := ctl.Run(context.Background(), []string{"timerctl", "schedules", "--generate-bash-completion"}, o); code != 0 ||
		!strings.HasPrefix(out.String(), "list\n") || !strings.Contains(out.String(), "\npause\n") || strings.Contains(out.String(), "help") {
		t.Fatalf("completion of 'schedules ': exit %d %q; want its actions", code, out.String())
	}
	for _, sh := range []string{"bash", "zsh"} {
		out.Reset()
		if code := ctl.Run(context.Background(), []string{"timerctl", "completion", sh}, o); code != 0 || !strings.Contains(out.String(), "--generate-bash-completion") {
			t.Fatalf("completion %s: exit %d %q", sh, code, out.String())
		}
	}
	// Completion of names reads os.Args (urfave/cli), so the binary's test
	// covers it: cmd/timerctl.
}
