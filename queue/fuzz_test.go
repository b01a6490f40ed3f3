package queue_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/queue"
)

// The fuzz targets below run in CI for a bounded time each (.ci/run); as
// plain tests they replay their seeds and testdata/fuzz. They use
// miniredis, which runs the same Lua scripts: the encoder is the scripts'
// encode (scripts/lua/includes/encode.lua), the decoder Go's, so a round trip checks one
// against the other.

// idOracle is ValidateID's documented rule, written independently.
func idOracle(id string) bool {
	if id == "" || len(id) > queue.MaxIDBytes || !utf8.ValidString(id) {
		return false
	}
	return !strings.ContainsFunc(id, unicode.IsControl)
}

// FuzzValidateID checks that ValidateID accepts exactly the documented IDs,
// that every accepted ID round-trips through Schedule and Get unchanged
// (Redis and the record format take any bytes in an ID, ':' and all), and
// that a rejected one is refused by Schedule with nothing written.
func FuzzValidateID(f *testing.F) {
	for _, s := range []string{"order-1", "", "a:b:c", "s::1::", "with space", "ünïcødé ✓", "tab\there",
		"nul\x00", "\xff\xfe", "del\x7f", "c1\u0085", "{ns}", "*", strings.Repeat("x", 256), strings.Repeat("x", 257),
		strings.Repeat("é", 128), strings.Repeat("é", 129)} {
		f.Add(s)
	}
	m, c := redistest.Mini(f)
	q, err := queue.New(c, queue.Options{Namespace: "fuzz"})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { q.Close() })
	ctx := context.Background()
	due := time.Now().Add(time.Hour).Truncate(time.Millisecond)
	f.Fuzz(func(t *testing.T, id string) {
		m.FlushAll()
		err := queue.ValidateID(id)
		if want := idOracle(id); (err == nil) != want {
			t.Fatalf("ValidateID(%q) = %v, want valid=%v", id, err, want)
		}
		res, serr := q.Schedule(ctx, id, due, []byte("p"))
		if err != nil {
			if !errors.Is(err, queue.ErrInvalidID) || !strings.Contains(err.Error(), "use 1-256 bytes") {
				t.Fatalf("ValidateID(%q) = %v, want ErrInvalidID with a hint", id, err)
			}
			if !errors.Is(serr, queue.ErrInvalidID) {
				t.Fatalf("Schedule(%q) = %v, want ErrInvalidID", id, serr)
			}
			if keys := m.Keys(); len(keys) != 0 {
				t.Fatalf("Schedule(%q) was refused but wrote %v", id, keys)
			}
			return
		}
		if _, _, occ := queue.ParseOccurrenceID(id); occ {
			// A valid ID, but an occurrence's: refused for a plain timer.
			if !errors.Is(serr, queue.ErrOccurrenceID) {
				t.Fatalf("Schedule(%q) = %v, want ErrOccurrenceID", id, serr)
			}
			if keys := m.Keys(); len(keys) != 0 {
				t.Fatalf("Schedule(%q) was refused but wrote %v", id, keys)
			}
			return
		}
		if serr != nil || !res.Created || res.Timer.ID != id {
			t.Fatalf("Schedule(%q) = %+v, %v; want created", id, res, serr)
		}
		got, err := q.Get(ctx, id)
		if err != nil || got.ID != id || got.State != queue.StateScheduled || !got.Due.Equal(due) {
			t.Fatalf("Get(%q) = %+v, %v", id, got, err)
		}
		if again, err := q.Schedule(ctx, id, due.Add(time.Hour), nil); err != nil || again.Created || !again.Timer.Due.Equal(due) {
			t.Fatalf("Schedule(%q) again = %+v, %v; want the first timer back unchanged", id, again, err)
		}
	})
}

// nsOracle is ValidateNamespace's documented rule, written independently.
func nsOracle(ns string) bool {
	if ns == "" || len(ns) > queue.MaxNamespaceLen {
		return false
	}
	for _, r := range ns {
		if !(r < unicode.MaxASCII && (unicode.IsLetter(r) || unicode.IsDigit(r) || r == '_' || r == '.' || r == '-')) {
			return false
		}
	}
	return true
}

// FuzzValidateNamespace checks that ValidateNamespace accepts exactly the
// documented names, that New agrees with it, and that the timers of an
// accepted namespace live only under keys carrying that namespace (so two
// namespaces never share a key, or a Cluster slot's hash tag).
func FuzzValidateNamespace(f *testing.F) {
	for _, s := range []string{"default", "", "a", "A-z_0.9", "with space", "br{ace", "br}ace", "colon:",
		"ünï", "\x00", "*", strings.Repeat("n", 64), strings.Repeat("n", 65)} {
		f.Add(s)
	}
	m, c := redistest.Mini(f)
	ctx := context.Background()
	due := time.Now().Add(time.Hour).Truncate(time.Millisecond)
	f.Fuzz(func(t *testing.T, ns string) {
		m.FlushAll()
		err := queue.ValidateNamespace(ns)
		if want := nsOracle(ns); (err == nil) != want {
			t.Fatalf("ValidateNamespace(%q) = %v, want valid=%v", ns, err, want)
		}
		if ns == "" {
			return // Options.Namespace "" selects the default namespace
		}
		q, nerr := queue.New(c, queue.Options{Namespace: ns})
		if err != nil {
			if !errors.Is(err, queue.ErrInvalidNamespace) || !errors.Is(nerr, queue.ErrInvalidNamespace) {
				t.Fatalf("namespace %q: ValidateNamespace = %v, New = %v; want ErrInvalidNamespace from both", ns, err, nerr)
			}
			return
		}
		if nerr != nil {
			t.Fatalf("New(%q) = %v after ValidateNamespace accepted it", ns, nerr)
		}
		defer q.Close()
		if _, err := q.Schedule(ctx, "t", due, nil); err != nil {
			t.Fatalf("Schedule in %q: %v", ns, err)
		}
		if got, err := q.Get(ctx, "t"); err != nil || !got.Due.Equal(due) {
			t.Fatalf("Get in %q = %+v, %v", ns, got, err)
		}
		for _, k := range m.Keys() {
			if !strings.Contains(k, "{"+ns+"}") {
				t.Fatalf("namespace %q wrote key %q, outside its hash tag", ns, k)
			}
		}
	})
}

// FuzzRecordRoundTrip schedules a timer with a fuzzed ID, payload and due
// time, reads it back with Get, then fires or cancels it and reads it
// again: each read must give back exactly what was stored, whatever bytes
// the payload holds (':' and NUL included), and the fire stream must carry
// the same payload.
func FuzzRecordRoundTrip(f *testing.F) {
	f.Add("t1", []byte("hello"), int64(-1000), uint8(0))
	f.Add("a:b", []byte("p:1:2:3:"), int64(-1), uint8(1))
	f.Add("s::", []byte("s::1::x"), int64(3_600_000), uint8(2))
	f.Add("nul", []byte{0, ':', 0, 0xff, '\n'}, int64(-5), uint8(1))
	f.Add("empty", []byte{}, int64(0), uint8(1))
	f.Add("far", []byte("x"), int64(-1_700_000_000_000), uint8(1))
	m, c := redistest.Mini(f)
	q, err := queue.New(c, queue.Options{Namespace: "fuzz"})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { q.Close() })
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, id string, payload []byte, offsetMs int64, action uint8) {
		if _, _, occ := queue.ParseOccurrenceID(id); queue.ValidateID(id) != nil || occ || len(payload) > queue.DefaultMaxPayloadBytes {
			t.Skip() // occ: a plain timer may not take an occurrence's ID
		}
		m.FlushAll()
		now := time.Now().Truncate(time.Millisecond)
		// Keep the due time inside ValidateDue's range.
		due := now.Add(time.Duration(max(min(offsetMs, 100*365*24*3_600_000), -now.UnixMilli())) * time.Millisecond).UTC()
		res, err := q.Schedule(ctx, id, due, payload)
		if err != nil {
			t.Fatalf("Schedule: %v", err)
		}
		want := queue.Timer{ID: id, State: queue.StateScheduled, Due: due, Payload: payload, CreatedAt: res.Timer.CreatedAt}
		if res.Timer.CreatedAt.IsZero() {
			t.Fatalf("Schedule returned no creation time: %+v", res.Timer)
		}
		same(t, "Schedule", res.Timer, want)
		got, err := q.Get(ctx, id)
		if err != nil {
			t.Fatalf("Get: %v", err)
		}
		same(t, "Get", got, want)

		switch action % 3 {
		case 1: // fire it, if it is due by the server's clock
			if due.After(now) {
				return
			}
			res, err := q.Engine().Claim(ctx, 1)
			if err != nil || len(res.Fired) != 1 {
				t.Fatalf("Claim = %+v, %v; want the timer", res, err)
			}
			fired := res.Fired[0]
			if fired.ID != id || !bytes.Equal(fired.Payload, payload) || !fired.Due.Equal(due) || fired.FiredAt.Before(due) {
				t.Fatalf("Claim fired %+v, want id %q due %v payload %q", fired, id, due, payload)
			}
			want.State, want.FiredAt = queue.StateFired, fired.FiredAt
			msgs, err := c.XRange(ctx, q.Keys().Stream(0), "-", "+").Result()
			if err != nil || len(msgs) != 1 || msgs[0].Values["id"] != id || msgs[0].Values["payload"] != string(payload) {
				t.Fatalf("fire stream = %v, %v; want one entry with id %q and payload %q", msgs, err, id, payload)
			}
		case 2:
			ct, err := q.Cancel(ctx, id)
			if err != nil || ct.CancelledAt.IsZero() {
				t.Fatalf("Cancel = %+v, %v", ct, err)
			}
			want.State, want.CancelledAt = queue.StateCancelled, ct.CancelledAt
			same(t, "Cancel", ct, want)
		default:
			return
		}
		got, err = q.Get(ctx, id)
		if err != nil {
			t.Fatalf("Get after %v: %v", want.State, err)
		}
		same(t, "Get after "+string(want.State), got, want)
	})
}

// same fails t unless got equals want field by field (times by instant).
func same(t *testing.T, what string, got, want queue.Timer) {
	t.Helper()
	if got.ID != want.ID || got.State != want.State || !got.Due.Equal(want.Due) || !bytes.Equal(got.Payload, want.Payload) ||
		!got.CreatedAt.Equal(want.CreatedAt) || !got.FiredAt.Equal(want.FiredAt) || !got.CancelledAt.Equal(want.CancelledAt) {
		t.Fatalf("%s = %+v\nwant %+v", what, got, want)
	}
}
