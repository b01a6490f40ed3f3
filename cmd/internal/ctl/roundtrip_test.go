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

	"github.com/redis/go-redis/v9"

	"github.com/timerq/timerq/cmd/internal/ctl"
	"github.com/timerq/timerq/internal/keyspace"
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
		if n, err := b.Client.XLen(context.Background(), dst.q.Keys().Stream(0)).Result(); err != nil || n != 0 {
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
		// Text in "payload", which is base64: say so, and name payload_text.
		{`{"id":"a","in":"5m","payload":"hello world"}`, `"payload" is not base64 (illegal base64 data at input byte 5): "payload" takes the bytes in base64, as export writes them, and "payload_text" takes text as it is`},
		// An ID that encoding/json would rewrite to U+FFFD.
		{"{\"id\":\"a\xffb\",\"in\":\"5m\"}", "the line is not valid UTF-8 (byte 9 of it, 0xff)"},
		{`{"id":"a\ud800b","in":"5m"}`, `the line has \ud800, half of a UTF-16 surrogate pair`},
		{`{"id":"a\udc00","in":"5m"}`, `the line has \udc00, half of a UTF-16 surrogate pair`},
		{`{"id":"a","in":"5m","payload_text":"\ud83d"}`, `the line has \ud83d, half`},
		{"{\"kind\":\"schedule\",\"id\":\"s\xc3\",\"every\":\"1m\"}", "is not valid UTF-8"},
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
	// What is valid stays so: an escaped pair, an escaped backslash before
	// "u", and U+FFFD itself.
	for _, l := range []string{`{"id":"a\ud83d\ude00","in":"5m"}`, `{"id":"b\\ud800","in":"5m"}`, "{\"id\":\"c\ufffd\",\"in\":\"5m\"}"} {
		var out, errOut bytes.Buffer
		if code := ctl.Run(context.Background(), []string{"timerctl", "--redis", "redis://" + m.Addr(), "import"},
			ctl.Options{Stdin: strings.NewReader(l + "\n"), Stdout: &out, Stderr: &errOut}); code != 0 {
			t.Errorf("%s: exit %d, stderr %q; want it imported", l, code, errOut.String())
		}
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
			// -o json shows the due time's millisecond; it may have µs.
			due := mustTime(t, dueAt)
			if due.Before(before.Add(d).Truncate(time.Millisecond)) || due.After(after.Add(d+time.Millisecond)) {
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

// TestExportSkipsAnIDJSONCannotCarry: a record written by hand under an ID
// that is not UTF-8 (no API takes one) is not exported as its U+FFFD
// rewrite, which import would create as another timer: export names it on
// stderr, writes every other timer and exits 1.
func TestExportSkipsAnIDJSONCannotCarry(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		c := newCLI(t, b)
		c.ok("schedule", "good", "--in", "1h")
		sp := keyspace.Shard(c.ns, 0, 1)
		rec, err := b.Client.HGet(ctx, sp.Timers(), "good").Result()
		if err != nil {
			t.Fatal(err)
		}
		due, err := b.Client.ZScore(ctx, sp.Due(), "good").Result()
		if err != nil {
			t.Fatal(err)
		}
		const bad = "b\xffd"
		if err := b.Client.HSet(ctx, sp.Timers(), bad, rec).Err(); err != nil {
			t.Fatal(err)
		}
		if err := b.Client.ZAdd(ctx, sp.Due(), redis.Z{Score: due, Member: bad}).Err(); err != nil {
			t.Fatal(err)
		}
		r := c.run("export")
		if r.code != ctl.ExitFailure || !strings.Contains(r.stderr, `timer "b\xffd" has an ID that is not valid UTF-8`) ||
			!strings.Contains(r.stderr, "1 timers were not exported") {
			t.Fatalf("export: exit %d, stderr %q; want 1 naming the ID", r.code, r.stderr)
		}
		if strings.Contains(r.stdout, "\uFFFD") || !strings.Contains(r.stdout, `"id":"good"`) || strings.Count(r.stdout, "\n") != 1 {
			t.Fatalf("export wrote %q; want the good timer only", r.stdout)
		}
	})
}

// A due time below the millisecond survives export and import: the line
// keeps its microseconds, so the copy fires at the same microsecond and
// never before (truncated to the ms it would fire up to 1 ms early).
func TestExportImportKeepsMicroseconds(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		due := time.Date(2031, 5, 6, 7, 8, 9, 123_456_000, time.UTC)
		src := newCLI(t, b)
		src.ok("schedule", "sub", "--at", "2031-05-06T07:08:09.123456Z")
		exp := src.ok("export").stdout
		if !strings.Contains(exp, `"due_at":"2031-05-06T07:08:09.123456Z"`) {
			t.Fatalf("export %s lost the microseconds", exp)
		}
		dst := newCLI(t, b)
		if r := dst.runCtx(context.Background(), exp, "import"); r.code != 0 {
			t.Fatalf("import: exit %d %q %q", r.code, r.stdout, r.stderr)
		}
		if got, err := dst.q.Get(context.Background(), "sub"); err != nil || !got.Due.Equal(due) {
			t.Fatalf("imported %+v, %v; want due %v", got, err, due)
		}
		// Answers show the millisecond, as the API's contract says.
		if got := decode[timerJSON](t, dst.ok("-o", "json", "get", "sub").stdout); got.DueAt != "2031-05-06T07:08:09.123Z" {
			t.Errorf("get -o json shows due_at %q", got.DueAt)
		}
		if again := dst.ok("export").stdout; again != exp {
			t.Errorf("the copy exports differently:\n%s\nwas\n%s", again, exp)
		}
		if b.Mini == nil {
			return
		}
		b.Mini.SetTime(due.Add(-time.Microsecond))
		if f := dst.claim(); len(f) != 0 {
			t.Fatalf("the copy fired %+v 1 µs before its due time", f)
		}
		b.Mini.SetTime(due)
		if f := dst.claim(); len(f) != 1 {
			t.Fatalf("the copy fired %+v at its due time, want it", f)
		}
	})
}

// An export of a namespace of layout 1 imports into one of layout 2, and
// back, with every timer as it was: the same lines, which layout 2 writes
// in its own order (settled timers by the time they settled).
func TestExportImportAcrossLayouts(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		src := newCLI(t, b)
		src.ok("schedule", "fired", "--at", "2020-01-02T03:04:05.678Z", "--payload", "f")
		src.ok("schedule", "cancelled", "--in", "1h", "--payload", "c")
		src.ok("schedule", "scheduled", "--in", "2h", "--payload", "s")
		src.ok("schedule", "micro", "--at", "2030-01-02T03:04:05.678901Z")
		if f := src.claim(); len(f) != 1 || f[0].ID != "fired" {
			t.Fatalf("claim fired %+v", f)
		}
		src.ok("cancel", "cancelled")
		exp := src.ok("export").stdout
		lines := func(s string) []string {
			return slices.Sorted(slices.Values(strings.Split(strings.TrimSpace(s), "\n")))
		}

		upgraded := newCLI(t, b)
		if st, err := upgraded.q.Engine().UpgradeLayout(ctx, 100); err != nil || !st.Done() {
			t.Fatalf("UpgradeLayout = %+v, %v", st, err)
		}
		if r := upgraded.runCtx(ctx, exp, "import"); r.code != 0 || !strings.Contains(r.stdout, "created 4, existing 0, rejected 0") {
			t.Fatalf("import into layout 2: exit %d %q %q", r.code, r.stdout, r.stderr)
		}
		if f := upgraded.claim(); len(f) != 0 {
			t.Fatalf("claim after the import into layout 2 fired %+v", f)
		}
		exp2 := upgraded.ok("export").stdout
		if !slices.Equal(lines(exp2), lines(exp)) {
			t.Errorf("layout 2 exports\n%s\nwas, from layout 1,\n%s", exp2, exp)
		}
		back := newCLI(t, b)
		if r := back.runCtx(ctx, exp2, "import"); r.code != 0 || !strings.Contains(r.stdout, "created 4") {
			t.Fatalf("import back into layout 1: exit %d %q %q", r.code, r.stdout, r.stderr)
		}
		if again := back.ok("export").stdout; again != exp {
			t.Errorf("back in layout 1, the export is\n%s\nwas\n%s", again, exp)
		}
		for _, id := range []string{"fired", "cancelled", "scheduled", "micro"} {
			x := src.ok("-o", "json", "get", id).stdout
			if y := upgraded.ok("-o", "json", "get", id).stdout; x != y {
				t.Errorf("%s in layout 1:\n%s in layout 2:\n%s", id, x, y)
			}
		}
	})
}
