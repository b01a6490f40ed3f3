package ctl

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/timerq/timerq/internal/timefmt"
	"github.com/timerq/timerq/queue"
)

// FuzzParseInstant checks the TIME parser of --at, --due-from, --due-to and
// import's time fields: it never panics, it refuses every bare number (the
// unit must be explicit), every refusal says what to write instead, and what
// it accepts survives format -> parse, in each of the forms it accepts.
func FuzzParseInstant(f *testing.F) {
	for _, s := range []string{
		"2026-12-02T19:00:00Z", "2026-12-02T19:00:00.123456789+05:30", "1796238000s", "1796238000000ms",
		"1796238000", "0", "0s", "0ms", "253402300799s", "253402300800s", "253402300799999ms",
		"9999-12-31T23:59:59.999Z", "1969-12-31T23:59:59Z", "-5s", "5m", "1e9s", "99999999999999999999ms",
		"", "s", "ms", " 1s", "1796238000 s", "2026-12-02", "next tuesday",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tm, err := timefmt.Parse(s)
		if err != nil {
			var e *timefmt.Error
			if !errors.As(err, &e) || e.Problem == "" || e.Fix == "" {
				t.Fatalf("%q: refusal %v does not say what to write instead", s, err)
			}
			if timefmt.IsBareNumber(s) && !strings.Contains(e.Fix, s+"s") || timefmt.IsBareNumber(s) && !strings.Contains(e.Fix, s+"ms") {
				t.Fatalf("%q: refusal of a bare number does not show both forms: %v", s, err)
			}
			return
		}
		if timefmt.IsBareNumber(s) {
			t.Fatalf("%q: a bare number was accepted as %v", s, tm)
		}
		if queue.ValidateDue(tm) != nil {
			t.Fatalf("%q: accepted %v, outside the due range", s, tm)
		}
		ms := tm.Truncate(time.Millisecond)
		for _, form := range []string{timefmt.Format(tm), fmt.Sprintf("%dms", tm.UnixMilli()), tm.Format(time.RFC3339Nano)} {
			back, err := timefmt.Parse(form)
			want := ms
			if form == tm.Format(time.RFC3339Nano) {
				want = tm
			}
			if err != nil || !back.Equal(want) {
				t.Fatalf("%q -> %v -> %q -> %v, %v; want %v", s, tm, form, back, err, want)
			}
		}
		if tm.Equal(tm.Truncate(time.Second)) {
			if back, err := timefmt.Parse(fmt.Sprintf("%ds", tm.Unix())); err != nil || !back.Equal(tm) {
				t.Fatalf("%q -> %v -> %ds -> %v, %v", s, tm, tm.Unix(), back, err)
			}
		}
	})
}

// FuzzParseDelay checks the DURATION parser of --in and import's "in": it
// never panics, never accepts a negative delay, and what it accepts survives
// format -> parse.
func FuzzParseDelay(f *testing.F) {
	for _, s := range []string{"0", "0s", "90s", "5m", "1h30m", "1.5us", "1ns", "-5s", "-0s", "2562047h47m16.854775807s",
		"2562047h47m16.854775808s", "30", "soon", "", "1e3s", ".5h"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, e := parseDelay(s)
		if e != nil {
			if e.Problem == "" || e.Fix == "" {
				t.Fatalf("%q: refusal %v does not say what to write instead", s, e)
			}
			return
		}
		if d < 0 {
			t.Fatalf("%q: accepted a negative delay %v", s, d)
		}
		if back, err := parseDelay(d.String()); err != nil || back != d {
			t.Fatalf("%q -> %v -> %q -> %v, %v", s, d, d.String(), back, err)
		}
	})
}

// FuzzParseImportLine checks import's line parser: it never panics, refuses
// a due_at given as a JSON number, accepts only timers the queue takes, and
// a timer it will restore survives export -> import unchanged, to the
// millisecond (the resolution of stored times), exporting to the same line
// again.
func FuzzParseImportLine(f *testing.F) {
	for _, s := range []string{
		`{"id":"order-42","due_at":"2026-12-02T19:00:00Z","payload":"ZXhwaXJl"}`,
		`{"id":"order-43","due_at":"1796238000s"}`,
		`{"id":"order-43","due_at":"1796238000000ms"}`,
		`{"id":"order-43","due_at":1796238000000}`,
		`{"id":"order-44","in":"30m","payload_text":"expire"}`,
		`{"id":"f","state":"fired","due_at":"2026-12-02T19:00:00.000Z","created_at":"2026-12-02T18:00:00.000Z","fired_at":"2026-12-02T19:00:00.004Z","payload":"AP8KOg=="}`,
		`{"id":"c","state":"cancelled","due_at":"2026-12-02T19:00:00.000Z","created_at":"2026-12-02T18:00:00.000Z","cancelled_at":"2026-12-02T18:30:00.000Z","payload":""}`,
		`{"id":"s","state":"scheduled","due_at":"2026-12-02T19:00:00.123456Z","created_at":"2026-12-02T18:00:00.000Z","fired_at":null,"payload":""}`,
		`{"id":"s","state":"scheduled","due_at":"2026-12-02T19:00:00Z","created_at":"2026-12-02T18:00:00Z","in":"5m"}`,
		`{"id":"x","due_at":"2026-12-02T19:00:00Z"} {}`,
		`{"id":"","in":"1s"}`, `{"id":"a\u0000","in":"1s"}`, `[1,2]`, `null`, `{`, ``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		const maxPay = 64 << 10
		it, err := parseLine(line, maxPay)
		var raw map[string]json.RawMessage
		if json.Unmarshal(line, &raw) == nil {
			if d := bytes.TrimSpace(raw["due_at"]); len(d) > 0 && (d[0] == '-' || d[0] >= '0' && d[0] <= '9') && err == nil {
				t.Fatalf("%s: a due_at that is a JSON number was accepted", line)
			}
		}
		if err != nil {
			if err.Error() == "" {
				t.Fatalf("%s: empty refusal", line)
			}
			return
		}
		if !it.restore {
			nt := it.sched
			if queue.ValidateID(nt.ID) != nil || len(nt.Payload) > maxPay || nt.In < 0 ||
				!nt.Due.IsZero() && (nt.In != 0 || queue.ValidateDue(nt.Due) != nil) {
				t.Fatalf("%s: accepted a timer the queue refuses: %+v", line, nt)
			}
			return
		}
		tm := it.timer
		if (tm.State == queue.StateFired) != !tm.FiredAt.IsZero() || (tm.State == queue.StateCancelled) != !tm.CancelledAt.IsZero() {
			t.Fatalf("%s: inconsistent settled times %+v", line, tm)
		}
		out1, err := json.Marshal(toExportLine(tm))
		if err != nil {
			t.Fatal(err)
		}
		it2, err := parseLine(out1, maxPay)
		if err != nil || !it2.restore {
			t.Fatalf("%s -> export %s is refused by import: %v", line, out1, err)
		}
		ms := func(x time.Time) time.Time { return x.Truncate(time.Millisecond) }
		// A due time keeps its microseconds (timefmt.Format), so that an
		// export does not make a timer early; the other times are ms.
		us := func(x time.Time) time.Time { return x.Truncate(time.Microsecond) }
		t2 := it2.timer
		if t2.ID != tm.ID || t2.State != tm.State || !bytes.Equal(t2.Payload, tm.Payload) || !t2.Due.Equal(us(tm.Due)) ||
			!t2.CreatedAt.Equal(ms(tm.CreatedAt)) || !t2.FiredAt.Equal(ms(tm.FiredAt)) || !t2.CancelledAt.Equal(ms(tm.CancelledAt)) {
			t.Fatalf("%s -> %s -> %+v, want %+v", line, out1, t2, tm)
		}
		if out2, _ := json.Marshal(toExportLine(t2)); !bytes.Equal(out1, out2) {
			t.Fatalf("export is not a fixed point: %s then %s", out1, out2)
		}
	})
}
