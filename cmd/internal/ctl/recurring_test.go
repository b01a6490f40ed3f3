package ctl_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/timerq/timerq/cmd/internal/ctl"
	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/queue"
)

// scheduleJSON is the documented JSON schema of a schedule (docs/timerctl.md).
type scheduleJSON struct {
	ID           string  `json:"id"`
	Cron         string  `json:"cron"`
	TZ           string  `json:"tz"`
	Every        string  `json:"every"`
	Anchor       *string `json:"anchor"`
	State        string  `json:"state"`
	Version      int64   `json:"version"`
	Payload      []byte  `json:"payload"`
	CatchUp      string  `json:"catch_up"`
	CatchUpLimit int     `json:"catch_up_limit"`
	Jitter       string  `json:"jitter"`
	End          *string `json:"end"`
	MaxCount     int64   `json:"max_count"`
	Ahead        int     `json:"ahead"`
	Overlap      string  `json:"overlap"`
	Count        int64   `json:"count"`
	Last         *string `json:"last"`
	Pending      []struct {
		ID      string `json:"id"`
		Nominal string `json:"nominal"`
		DueAt   string `json:"due_at"`
	} `json:"pending"`
	Next      []string `json:"next"`
	CreatedAt string   `json:"created_at"`
	UpdatedAt string   `json:"updated_at"`
	Note      string   `json:"note"`
}

func TestRecurringSchedulesCommands(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		c := newCLI(t, b)
		s := decode[scheduleJSON](t, c.ok("schedule", "report", "--cron", "0 9 * * MON-FRI", "--tz", "Europe/Berlin",
			"--catch-up", "all", "--catch-up-limit", "3", "--max-count", "10", "-p", "go", "-o", "json").stdout)
		if s.ID != "report" || s.Cron != "0 9 * * MON-FRI" || s.TZ != "Europe/Berlin" || s.State != "active" ||
			s.CatchUp != "all" || s.CatchUpLimit != 3 || s.MaxCount != 10 || string(s.Payload) != "go" || s.Note != "created" || s.Overlap != "allow" {
			t.Fatalf("created schedule = %+v", s)
		}
		if len(s.Next) != 5 || len(s.Pending) != 2 {
			t.Fatalf("next %v pending %v; want 5 next and 2 armed", s.Next, s.Pending)
		}
		for i, n := range s.Next {
			tm := mustTime(t, n).In(mustLoc(t, "Europe/Berlin"))
			if tm.Hour() != 9 || tm.Minute() != 0 || tm.Weekday() == time.Saturday || tm.Weekday() == time.Sunday {
				t.Fatalf("next[%d] = %v, not 09:00 on a weekday in Berlin", i, tm)
			}
		}
		if s.Pending[0].ID != queue.OccurrenceID("report", mustTime(t, s.Next[0])) {
			t.Fatalf("first pending %s is not the first next occurrence %s", s.Pending[0].ID, s.Next[0])
		}

		// Idempotent without --update; changed with it.
		again := decode[scheduleJSON](t, c.ok("schedule", "report", "--every", "1h", "-o", "json").stdout)
		if again.Cron != "0 9 * * MON-FRI" || again.Every != "" || !strings.Contains(again.Note, "left unchanged") {
			t.Fatalf("second schedule without --update = %+v", again)
		}
		up := decode[scheduleJSON](t, c.ok("schedule", "report", "--every", "1h", "--update", "-o", "json").stdout)
		if up.Every != "1h0m0s" || up.Cron != "" || up.Version != 2 || up.Note != "updated" {
			t.Fatalf("update = %+v", up)
		}

		c.ok("schedule", "tick", "--every", "90s", "--overlap", "skip")
		if tick := decode[scheduleJSON](t, c.ok("schedules", "get", "tick", "-o", "json").stdout); tick.Overlap != "skip" {
			t.Fatalf("get -o json: overlap %q, want skip", tick.Overlap)
		}
		if r := c.ok("schedules", "get", "tick"); !strings.Contains(r.stdout, "overlap skip") {
			t.Fatalf("get does not show the overlap policy:\n%s", r.stdout)
		}
		list := decode[struct {
			Schedules  []scheduleJSON `json:"schedules"`
			NextCursor string         `json:"next_cursor"`
		}](t, c.ok("schedules", "list", "-o", "json").stdout)
		if len(list.Schedules) != 2 {
			t.Fatalf("list = %+v", list)
		}
		if r := c.ok("schedules", "list"); !strings.Contains(r.stdout, "tick") || !strings.Contains(r.stdout, "every 1m30s") {
			t.Fatalf("list table:\n%s", r.stdout)
		}

		p := decode[scheduleJSON](t, c.ok("schedules", "pause", "tick", "-o", "json").stdout)
		if p.State != "paused" || len(p.Pending) != 0 {
			t.Fatalf("pause = %+v", p)
		}
		if r := c.ok("schedules", "get", "tick"); !strings.Contains(r.stdout, "paused") {
			t.Fatalf("get after pause:\n%s", r.stdout)
		}
		if p := decode[scheduleJSON](t, c.ok("schedules", "resume", "tick", "-o", "json").stdout); p.State != "active" || len(p.Pending) != 2 {
			t.Fatalf("resume = %+v", p)
		}
		c.ok("schedules", "delete", "tick")
		for _, args := range [][]string{{"schedules", "get", "tick"}, {"schedules", "delete", "tick"}, {"schedules", "pause", "nope"},
			{"schedule", "nope", "--every", "1m", "--update"}} {
			// queue's hint names the Go call; timerctl prints its own.
			if r := c.run(args...); r.code != ctl.ExitNotFound || !strings.Contains(r.stderr, "'timerctl schedules list'") || strings.Contains(r.stderr, "Recurring().List") {
				t.Errorf("%q: exit %d, stderr %q; want %d and timerctl's hint", args, r.code, r.stderr, ctl.ExitNotFound)
			}
		}
	})
}

func TestRecurringScheduleBadInput(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		c := newCLI(t, b)
		for _, args := range [][]string{
			{"schedule", "x", "--cron", "61 * * * *"},
			{"schedule", "x", "--cron", "@daily", "--every", "1h"},
			{"schedule", "x", "--every", "1h", "--in", "5m"},
			{"schedule", "x", "--every", "soon"},
			{"schedule", "x", "--cron", "@daily", "--tz", "Mars/Olympus"},
			{"schedule", "x", "--every", "1h", "--catch-up", "maybe"},
			{"schedule", "x", "--every", "1h", "--overlap", "buffer"},
			{"schedules"},
			{"schedules", "frobnicate", "x"},
			{"schedules", "get"},
		} {
			if r := c.run(args...); r.code != ctl.ExitUsage || !strings.HasPrefix(r.stderr, "timerctl: ") {
				t.Errorf("%q: exit %d, stderr %q; want %d", args, r.code, r.stderr, ctl.ExitUsage)
			}
		}
		if keys := c.keys(); len(keys) != 0 {
			t.Fatalf("bad input wrote keys: %v", keys)
		}
	})
}

func mustLoc(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Skip(err)
	}
	return loc
}

// schedules export -> import into another namespace restores every
// schedule: spec, zone, policies, payload, state, count, last armed time,
// creation time and its pending occurrences (same IDs and due times).
func TestRecurringExportImportRoundTrip(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		src := newCLI(t, b)
		src.ok("schedule", "a", "--every", "90s", "--jitter", "10s", "--max-count", "7", "--catch-up", "all", "--overlap", "skip", "-p", "\x00bin")
		src.ok("schedule", "b", "--cron", "0 9 * * MON-FRI", "--tz", "Europe/Berlin", "--end", "2099-01-01T00:00:00Z")
		src.ok("schedules", "pause", "b")
		out := src.ok("schedules", "export").stdout
		if n := strings.Count(out, "\n"); n != 2 {
			t.Fatalf("export printed %d lines:\n%s", n, out)
		}
		dst := newCLI(t, b)
		r := dst.runCtx(context.Background(), out, "schedules", "import", "-")
		if r.code != 0 || !strings.Contains(r.stdout, "2 created") {
			t.Fatalf("import: exit %d, %q, %q", r.code, r.stdout, r.stderr)
		}
		if r := dst.runCtx(context.Background(), out, "schedules", "import"); !strings.Contains(r.stdout, "2 already existed") {
			t.Fatalf("second import: %q", r.stdout)
		}
		for _, id := range []string{"a", "b"} {
			want := decode[scheduleJSON](t, src.ok("schedules", "get", id, "-o", "json").stdout)
			got := decode[scheduleJSON](t, dst.ok("schedules", "get", id, "-o", "json").stdout)
			want.Version, got.Version, want.Next, got.Next = 0, 0, nil, nil
			g, _ := json.Marshal(got)
			w, _ := json.Marshal(want)
			if string(g) != string(w) {
				t.Fatalf("schedule %s after the round trip:\n got %s\nwant %s", id, g, w)
			}
		}
		if r := dst.runCtx(context.Background(), "{\"id\": 3}\n", "schedules", "import"); r.code != ctl.ExitUsage || !strings.Contains(r.stderr, "line 1") {
			t.Fatalf("bad line: exit %d, %q", r.code, r.stderr)
		}
	})
}

// TestEveryHasAMinimum: an --every below 1 s is refused, reading "10ms" as
// the typo of 10m it likely is, unless --min-every lowers the bound; a
// negative one is told to be positive, not to use --at.
func TestEveryHasAMinimum(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		c := newCLI(t, b)
		for _, tc := range []struct {
			args []string
			want string
		}{
			{[]string{"schedule", "x", "--every", "10ms"}, "--every 10ms is shorter than the minimum interval of 1s: 6000 occurrences a minute: did you mean --every 10m? to mean it, add --min-every 10ms"},
			{[]string{"schedule", "x", "--every", "500ms", "--min-every", "600ms"}, "shorter than the minimum interval of 600ms"},
			{[]string{"schedule", "x", "--every", "0s"}, `--every "0s" is not an interval: use a positive duration, e.g. --every 10m`},
			{[]string{"schedule", "x", "--every", "-5s"}, `--every "-5s" is negative: use a positive duration, e.g. --every 5s`},
			{[]string{"schedule", "x", "--every", "1h", "--jitter", "-1m"}, `--jitter "-1m" is negative: use a positive duration, e.g. --jitter 1m0s`},
			{[]string{"schedule", "x", "--cron", "@daily", "--min-every", "1ms"}, "--min-every is given without --every"},
		} {
			r := c.run(tc.args...)
			if r.code != ctl.ExitUsage || !strings.Contains(r.stderr, tc.want) || strings.Contains(r.stderr, "--at") {
				t.Errorf("%q: exit %d, stderr %q; want %d with %q", tc.args, r.code, r.stderr, ctl.ExitUsage, tc.want)
			}
		}
		if keys := c.keys(); len(keys) != 0 {
			t.Fatalf("refused schedules wrote keys: %v", keys)
		}
		if got := decode[scheduleJSON](t, c.ok("schedule", "fast", "--every", "10ms", "--min-every", "10ms", "-o", "json").stdout); got.Every != "10ms" {
			t.Fatalf("--every 10ms --min-every 10ms made %+v", got)
		}
		c.ok("schedule", "slow", "--every", "1s")
	})
}
