package queue

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/timerq/timerq/internal/redistest"
)

// FuzzQuarantineMatchesDecoder plants any bytes as a due timer's record,
// with any due score, and runs the real claim on a real redis-server (whose
// Lua decides string.match and tonumber). The claim quarantines the record
// if and only if decodeStored rejects it; when it accepts it, the claim
// does what the decoded timer says: a scheduled one fires once with its due
// time and payload and keeps its created time, a settled one only leaves
// the due set. So no record timerq could have written is ever quarantined,
// and no record the Go side cannot read is ever fired.
//
//	go test ./queue/ -run '^$' -fuzz FuzzQuarantineMatchesDecoder -fuzztime 1m
func FuzzQuarantineMatchesDecoder(f *testing.F) {
	for _, seed := range []struct {
		raw  string
		due  int64
		half bool
	}{
		{"s::1796237000000::payload", 1796238000, false},
		{"s::0::", 0, false},
		{"s::253402300799999::", 5, false},
		{"s::253402300800000::", 5, false},   // one ms past 9999
		{"s::0253402300799999::", 5, false},  // 16 digits
		{"s::025340230079999::", 5, false},   // 15 with a leading zero
		{"s::+1::", 5, false},                // a sign
		{"s::-1::", 5, false},                // a negative
		{"s::::", 5, false},                  // no created time
		{"s::1:2:", 5, false},                // settled on a scheduled record
		{"s:3:1::", 5, false},                // due on a scheduled record
		{"s::1::", 5, true},                  // fractional score
		{"s::1::", -5, false},                // negative score
		{"f:1:2:3:p", 5, false},              // fired, in the due set
		{"c:1:2:3:a:b:c", 5, false},          // cancelled
		{"f:1:2::p", 5, false},               // fired without its fired time
		{"f::2:3:p", 5, false},               // fired without its due time
		{"x::1::", 5, false},                 // no state
		{"S::1::", 5, false},                 // upper case
		{"s::1", 5, false},                   // too few fields
		{"s::\u0661::", 5, false},            // an Arabic-Indic digit
		{"s:: 1::", 5, false},                // a space
		{"s::1::\x00\xff:\n", 5, false},      // any payload bytes
		{"", 5, false},                       // empty
		{"ss::1::", 5, false},                // two state bytes
		{"s::1e3::", 5, false},               // an exponent
		{"s::0x10::", 5, false},              // hex
		{"f:999999999999999:1:1:", 5, false}, // 15 nines, past 9999
	} {
		f.Add([]byte(seed.raw), seed.due, seed.half)
	}
	srv := redistest.Start(f, redistest.Config{})
	rdb := srv.Client(f)
	ctx := context.Background()
	q, err := New(rdb, Options{Namespace: redistest.Namespace(f)})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { q.Close() })
	// The shard's keys as its layout names them, once the queue read it
	// (and, under TIMERQ_TEST_LAYOUT=2, upgraded it): in layout 2 the due
	// set is the sched set, and the marker in the legacy due key stays.
	l, err := q.layout(ctx)
	if err != nil {
		f.Fatal(err)
	}
	sp := l.space(0)
	keys := append(sp.Keys(), sp.Traces(), sp.Quarantine())
	const id = "fz"
	// Claims take only what is due by the server clock: keep scores
	// below 2001-09-09 (1e15 would be 33658 AD and never due).
	const latest = 1_000_000_000_000
	f.Fuzz(func(t *testing.T, raw []byte, due int64, half bool) {
		if due > latest || due < -latest {
			t.Skip()
		}
		score := float64(due)
		if half {
			score += 0.5
		}
		if err := rdb.Del(ctx, keys...).Err(); err != nil {
			t.Fatal(err)
		}
		if err := rdb.HSet(ctx, sp.Timers(), id, raw).Err(); err != nil {
			t.Fatal(err)
		}
		if err := rdb.ZAdd(ctx, sp.Due(), redis.Z{Score: score, Member: id}).Err(); err != nil {
			t.Fatal(err)
		}
		res, err := q.Engine().Claim(ctx, 10)
		if err != nil {
			t.Fatalf("claim of %q at score %v: %v", raw, score, err)
		}
		want, derr := decodeStored(id, string(raw), score, true)
		quarantined := len(res.Quarantined) == 1
		if len(res.Quarantined) > 1 {
			t.Fatalf("%q: quarantined %+v", raw, res.Quarantined)
		}
		if quarantined != (derr != nil) {
			t.Fatalf("record %q at score %v: Lua quarantined it: %v; Go decoder: %v", raw, score, quarantined, derr)
		}
		if quarantined {
			qs, err := q.Quarantine().List(ctx)
			if err != nil || len(qs) != 1 || string(qs[0].Raw) != string(raw) || len(res.Fired) != 0 {
				t.Fatalf("%q: Quarantine() = %+v, %v; fired %v", raw, qs, err, res.Fired)
			}
			if n, _ := rdb.HLen(ctx, sp.Timers()).Result(); n != 0 {
				t.Fatalf("%q: quarantined but still in the timers hash", raw)
			}
			return
		}
		if want.State != StateScheduled {
			if len(res.Fired) != 0 {
				t.Fatalf("settled record %q fired: %+v", raw, res.Fired)
			}
			return
		}
		// A fired timer keeps the millisecond of its due score (a score
		// may hold microseconds), floored, as its fire time is TIME's.
		wantDue := want.Due.Truncate(time.Millisecond)
		if len(res.Fired) != 1 || !res.Fired[0].Due.Equal(wantDue) || string(res.Fired[0].Payload) != string(want.Payload) {
			t.Fatalf("record %q at score %v: fired %+v, want %+v", raw, score, res.Fired, want)
		}
		got, err := q.Get(ctx, id)
		if err != nil || got.State != StateFired || !got.Due.Equal(wantDue) || !got.CreatedAt.Equal(want.CreatedAt) ||
			string(got.Payload) != string(want.Payload) {
			t.Fatalf("record %q fired as %+v, %v; want %+v fired", raw, got, err, want)
		}
	})
}
