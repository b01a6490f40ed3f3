package ctl_test

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/queue"
)

func sortedLines(s string) string {
	l := strings.Split(s, "\n")
	slices.Sort(l)
	return strings.Join(l, "\n")
}

// sameSchedule compares a schedule in two namespaces, but for what a
// restore cannot keep: the version, and next (computed from now).
func sameSchedule(t *testing.T, src, dst *cli, id string) scheduleJSON {
	t.Helper()
	want := decode[scheduleJSON](t, src.ok("schedules", "get", id, "-o", "json").stdout)
	got := decode[scheduleJSON](t, dst.ok("schedules", "get", id, "-o", "json").stdout)
	want.Version, got.Version, want.Next, got.Next = 0, 0, nil, nil
	g, _ := json.Marshal(got)
	w, _ := json.Marshal(want)
	if string(g) != string(w) {
		t.Fatalf("schedule %s after the round trip:\n got %s\nwant %s", id, g, w)
	}
	return got
}

// TestExportImportCarriesSchedules: `export | import` carries timers and
// schedules, in every state, with every field; nothing is created twice
// (the pending occurrences are timer lines too), a second import changes
// nothing, and the copy exports the same text.
func TestExportImportCarriesSchedules(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		src := newCLI(t, b)
		src.ok("schedule", "plain", "--in", "2h", "-p", "x")
		src.ok("schedule", "active", "--every", "90s", "--jitter", "10s", "--max-count", "7", "--catch-up", "all",
			"--catch-up-limit", "4", "--overlap", "skip", "-p", "\x00bin")
		src.ok("schedule", "paused", "--cron", "0 9 * * MON-FRI", "--tz", "Europe/Berlin", "--end", "2099-01-01T00:00:00Z", "--ahead", "3")
		src.ok("schedules", "pause", "paused")
		// MaxCount 2 with 2 armed ahead: ended at once, its 2 occurrences pending.
		src.ok("schedule", "ended", "--every", "1h", "--max-count", "2", "--catch-up", "skip")
		states := map[string]string{"active": "active", "paused": "paused", "ended": "ended"}
		for id, st := range states {
			if got := decode[scheduleJSON](t, src.ok("schedules", "get", id, "-o", "json").stdout); got.State != st {
				t.Fatalf("schedule %s is %s, want %s", id, got.State, st)
			}
		}

		exp := src.ok("export").stdout
		lines := strings.Split(strings.TrimSpace(exp), "\n")
		kinds := map[string]int{}
		seenSchedule := false
		for _, l := range lines {
			if strings.HasPrefix(l, `{"kind":"schedule"`) {
				kinds["schedule"]++
				seenSchedule = true
				continue
			}
			if seenSchedule {
				t.Fatalf("a timer line after the schedules: %s", l)
			}
			kinds["timer"]++
		}
		// plain + active's 2 pending + paused's 3 cancelled + ended's 2 pending.
		if kinds["schedule"] != 3 || kinds["timer"] != 8 {
			t.Fatalf("export has %v lines, want 3 schedules after 8 timers:\n%s", kinds, exp)
		}
		if filtered := src.ok("export", "--state", "scheduled").stdout; strings.Contains(filtered, `"kind"`) {
			t.Fatalf("a filtered export carries schedules:\n%s", filtered)
		}

		dst := newCLI(t, b)
		r := dst.runCtx(ctx, exp, "import", "-")
		if r.code != 0 || !strings.Contains(r.stdout, "created 8, existing 0, rejected 0; schedules: 3 created, 0 existing") {
			t.Fatalf("import: exit %d, %q, %q", r.code, r.stdout, r.stderr)
		}
		for id := range states {
			got := sameSchedule(t, src, dst, id)
			if id == "active" && (got.Overlap != "skip" || got.CatchUpLimit != 4 || string(got.Payload) != "\x00bin" || got.Jitter != "10s") {
				t.Fatalf("active after the round trip: %+v", got)
			}
		}
		for _, id := range []string{"plain", queue.OccurrenceID("ended", mustTime(t, decode[scheduleJSON](t, src.ok("schedules", "get", "ended", "-o", "json").stdout).Pending[0].Nominal))} {
			x := src.ok("-o", "json", "get", id).stdout
			if y := dst.ok("-o", "json", "get", id).stdout; x != y {
				t.Errorf("timer %s: exported\n%s imported\n%s", id, x, y)
			}
		}
		s1, err := src.q.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		s2, err := dst.q.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if s1.Scheduled != s2.Scheduled || s1.Cancelled != s2.Cancelled || s2.Scheduled != 5 {
			t.Fatalf("stats: source %+v, copy %+v; want the same 5 scheduled", s1, s2)
		}
		// Schedules come in HSCAN order, which may differ between copies.
		if again := dst.ok("export").stdout; sortedLines(again) != sortedLines(exp) {
			t.Errorf("the copy exports differently:\n%s\nwas\n%s", again, exp)
		}
		r = dst.runCtx(ctx, exp, "import")
		if r.code != 0 || !strings.Contains(r.stdout, "created 0, existing 8, rejected 0; schedules: 0 created, 3 existing") {
			t.Fatalf("second import: exit %d, %q, %q", r.code, r.stdout, r.stderr)
		}
		if s3, _ := dst.q.Stats(ctx); s3.Scheduled != 5 {
			t.Fatalf("second import: %d scheduled, want 5", s3.Scheduled)
		}

		// `schedules export` writes the same lines, and import takes them;
		// `schedules import` still takes lines without a kind (as it
		// wrote them before) and refuses an unknown kind.
		if se := src.ok("schedules", "export").stdout; strings.Count(se, `{"kind":"schedule"`) != 3 {
			t.Fatalf("schedules export:\n%s", se)
		}
		old := strings.TrimSpace(src.ok("schedules", "get", "active", "-o", "json").stdout)
		var compact bytes.Buffer
		if err := json.Compact(&compact, []byte(old)); err != nil {
			t.Fatal(err)
		}
		third := newCLI(t, b)
		if r := third.runCtx(ctx, compact.String()+"\n", "schedules", "import"); r.code != 0 || !strings.Contains(r.stdout, "1 created") {
			t.Fatalf("schedules import of a line without kind: exit %d %q %q", r.code, r.stdout, r.stderr)
		}
		if r := third.runCtx(ctx, `{"kind":"job","id":"x"}`+"\n", "import"); r.code == 0 || !strings.Contains(r.stderr, "line 1") {
			t.Fatalf("import of an unknown kind: exit %d %q", r.code, r.stderr)
		}
	})
}

// TestImportedSchedulesFireEachOccurrenceOnce: a schedule imported with
// its occurrences into a fresh namespace goes on firing there, each
// occurrence exactly once, with none missing.
func TestImportedSchedulesFireEachOccurrenceOnce(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		const every = 300 * time.Millisecond
		now := time.Now().Truncate(time.Millisecond)
		advance := func(d time.Duration) {
			if b.Mini != nil {
				now = now.Add(d)
				b.Mini.SetTime(now)
				return
			}
			time.Sleep(d) // a real server's clock can only be waited for
		}
		if b.Mini != nil {
			b.Mini.SetTime(now)
		}
		src := newCLI(t, b)
		src.ok("schedule", "tick", "--every", every.String(), "--min-every", every.String(), "--overlap", "skip")
		anchor := mustTime(t, *decode[scheduleJSON](t, src.ok("schedules", "get", "tick", "-o", "json").stdout).Anchor)
		exp := src.ok("export").stdout

		dst := newCLI(t, b)
		if r := dst.runCtx(ctx, exp, "import"); r.code != 0 {
			t.Fatalf("import: exit %d %q", r.code, r.stderr)
		}
		fired := map[string]int{}
		for range 6 {
			advance(every)
			res := dst.claim()
			if _, err := dst.q.Engine().ArmFired(ctx, res); err != nil {
				t.Fatal(err)
			}
		}
		msgs, err := b.Client.XRange(ctx, dst.q.Keys().Stream(0), "-", "+").Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range msgs {
			fired[m.Values["id"].(string)]++
		}
		if len(fired) < 4 {
			t.Fatalf("fired %v over 6 intervals", fired)
		}
		for k := 1; k <= len(fired); k++ {
			id := queue.OccurrenceID("tick", anchor.Add(time.Duration(k)*every))
			if fired[id] != 1 {
				t.Fatalf("occurrence %d (%s) fired %d times; all: %v", k, id, fired[id], fired)
			}
		}
		if n, _ := b.Client.XLen(ctx, src.q.Keys().Stream(0)).Result(); n != 0 {
			t.Fatalf("the source namespace fired %d (nothing ran there)", n)
		}
	})
}
