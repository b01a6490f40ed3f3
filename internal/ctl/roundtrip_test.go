package ctl_test

import (
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/timerq/timerq/internal/ctl"
	"github.com/timerq/timerq/internal/redistest"
)

// everyByte is a payload of every byte value, the record separator ':' and
// a newline among them, which only base64 carries through JSON Lines whole.
func everyByte() []byte {
	p := make([]byte, 0, 260)
	for i := range 256 {
		p = append(p, byte(i))
	}
	return append(p, "\n:\xff"...)
}

func TestExportImportKeepsEveryState(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		src := newCLI(t, b)
		bin := filepath.Join(t.TempDir(), "bin")
		if err := os.WriteFile(bin, everyByte(), 0o600); err != nil {
			t.Fatal(err)
		}
		src.ok("schedule", "fired", "--at", "2020-01-02T03:04:05.678Z", "--payload-file", bin)
		src.ok("schedule", "cancelled", "--in", "1h", "--payload", "c")
		src.ok("schedule", "scheduled", "--in", "2h", "--payload-file", bin)
		src.ok("schedule", "empty", "--in", "3h")
		if f := src.claim(); len(f) != 1 || f[0].ID != "fired" {
			t.Fatalf("claim fired %+v", f)
		}
		src.ok("cancel", "cancelled")
		ids := []string{"fired", "cancelled", "scheduled", "empty"}

		exp := src.ok("export").stdout
		dst := newCLI(t, b)
		r := dst.runCtx(context.Background(), exp, "-o", "json", "import")
		if r.code != 0 || !strings.Contains(r.stdout, `"created": 4`) || !strings.Contains(r.stdout, `"existing": 0`) {
			t.Fatalf("import of the export: exit %d %q %q", r.code, r.stdout, r.stderr)
		}
		for _, id := range ids {
			x := src.ok("-o", "json", "get", id).stdout
			if y := dst.ok("-o", "json", "get", id).stdout; x != y {
				t.Errorf("%s exported:\n%s re-imported:\n%s", id, x, y)
			}
		}
		if got := decode[timerJSON](t, dst.ok("-o", "json", "get", "scheduled").stdout); !bytes.Equal(got.Payload, everyByte()) {
			t.Errorf("binary payload came back as %q", got.Payload)
		}
		// The fired timer does not fire again, and no consumer sees it.
		if f := dst.claim(); len(f) != 0 {
			t.Fatalf("claim after import fired %+v", f)
		}
		if n, err := b.Client.XLen(context.Background(), dst.q.StreamKey()).Result(); err != nil || n != 0 {
			t.Fatalf("the import added %d fire-stream entries (%v)", n, err)
		}
		// export | import | export is the same text.
		if again := dst.ok("export").stdout; again != exp {
			t.Errorf("the copy exports differently:\n%s\nwas\n%s", again, exp)
		}
		// Import again: every ID exists and is left alone.
		r = dst.runCtx(context.Background(), exp, "import")
		if r.code != 0 || !strings.Contains(r.stdout, "created 0, existing 4, rejected 0") {
			t.Fatalf("re-import: exit %d %q %q", r.code, r.stdout, r.stderr)
		}

		// Each state is one line with every field, and only its own
		// settled time.
		for _, line := range strings.Split(strings.TrimSpace(exp), "\n") {
			var m map[string]any
			if err := json.Unmarshal([]byte(line), &m); err != nil {
				t.Fatal(err)
			}
			want := []string{"cancelled_at", "created_at", "due_at", "id", "payload", "state"}
			switch m["state"] {
			case "fired":
				want = []string{"created_at", "due_at", "fired_at", "id", "payload", "state"}
			case "scheduled":
				want = []string{"created_at", "due_at", "id", "payload", "state"}
			}
			if got := slices.Sorted(maps.Keys(m)); !slices.Equal(got, want) {
				t.Errorf("export line %s has fields %v, want %v", line, got, want)
			}
		}
	})
}

func TestImportRefusesAmbiguousAndInconsistentLines(t *testing.T) {
	m, _ := redistest.Mini(t)
	lines := []struct{ line, want string }{
		{`{"id":"a","due_at":1796238000}`, `due_at 1796238000 is a number without a unit: write "1796238000s" for Unix seconds (2026-12-02T19:00:00.000Z) or "1796238000ms" for Unix milliseconds`},
		{`{"id":"a","due_at":"1796238000"}`, `write "1796238000s" for Unix seconds`},
		{`{"id":"a","due_at":1.5e9}`, `due_at 1.5e9 is not a time`},
		{`{"id":"a","state":"fired","due_at":"2026-01-01T00:00:00Z","created_at":"2026-01-01T00:00:00Z"}`, "fired_at"},
		{`{"id":"a","state":"scheduled","due_at":"2026-01-01T00:00:00Z","created_at":"2026-01-01T00:00:00Z","cancelled_at":"2026-01-01T00:00:00Z"}`, "cancelled_at is given with state scheduled"},
		{`{"id":"a","state":"scheduled","due_at":"2026-01-01T00:00:00Z"}`, "needs due_at and created_at"},
		{`{"id":"a","state":"scheduled","in":"5m","created_at":"2026-01-01T00:00:00Z"}`, `"in" is given with a state`},
		{`{"id":"a","state":"done","due_at":"2026-01-01T00:00:00Z","created_at":"2026-01-01T00:00:00Z"}`, `state "done"`},
		{`{"id":"a","in":"5m","created_at":"2026-01-01T00:00:00Z"}`, "need a state"},
		{`{"id":"a","state":"fired","due_at":"2026-01-01T00:00:00Z","created_at":"10000-01-01T00:00:00Z","fired_at":"2026-01-01T00:00:00Z"}`, "created_at"},
	}
	for _, l := range lines {
		var out, errOut bytes.Buffer
		code := ctl.Run(context.Background(), []string{"timerctl", "--redis", "redis://" + m.Addr(), "import"},
			ctl.Options{Stdin: strings.NewReader(l.line + "\n"), Stdout: &out, Stderr: &errOut})
		if code != ctl.ExitUsage || !strings.Contains(errOut.String(), "line 1: ") || !strings.Contains(errOut.String(), l.want) {
			t.Errorf("%s: exit %d, stderr %q; want %d and %q", l.line, code, errOut.String(), ctl.ExitUsage, l.want)
		}
	}
	if keys := m.Keys(); len(keys) != 0 {
		t.Fatalf("refused lines wrote %v", keys)
	}
}

// A client clock a year slow must not change when a relative timer is due:
// --in, import's "in" and reschedule --in count from the server's clock.
func TestInCountsFromTheServerClockNotTheClients(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		c := newCLI(t, b)
		c.now = func() time.Time { return time.Now().Add(-365 * 24 * time.Hour) }
		server := func() time.Time {
			now, err := b.Client.Time(context.Background()).Result()
			if err != nil {
				t.Fatal(err)
			}
			return now
		}
		if b.Mini != nil {
			b.Mini.SetTime(time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC))
		}
		check := func(what, dueAt string, d time.Duration, before, after time.Time) {
			t.Helper()
			due := mustTime(t, dueAt)
			if due.Before(before.Add(d)) || due.After(after.Add(d+time.Millisecond)) {
				t.Errorf("%s: due %v, want %v after the server clock (%v to %v)", what, due, d, before, after)
			}
		}
		before := server()
		got := decode[timerJSON](t, c.ok("-o", "json", "schedule", "a", "--in", "3s").stdout)
		check("schedule --in 3s", got.DueAt, 3*time.Second, before, server())

		before = server()
		got = decode[timerJSON](t, c.ok("-o", "json", "reschedule", "a", "--in", "1m").stdout)
		check("reschedule --in 1m", got.DueAt, time.Minute, before, server())

		before = server()
		if r := c.runCtx(context.Background(), `{"id":"b","in":"90s"}`+"\n", "import"); r.code != 0 {
			t.Fatalf("import: exit %d %q", r.code, r.stderr)
		}
		after := server()
		check(`import "in":"90s"`, decode[timerJSON](t, c.ok("-o", "json", "get", "b").stdout).DueAt, 90*time.Second, before, after)
	})
}
