package queue

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// FuzzRecordCodec encodes a record with the scripts' own encode (includes/encode.lua,
// run by miniredis) from fuzzed fields, in every state and with any times,
// and checks that decodeRecord gives every field back exactly. The API
// round trip (FuzzRecordRoundTrip) can only produce the times the server
// clock allows; this one reaches the rest.
func FuzzRecordCodec(f *testing.F) {
	f.Add(uint8(0), int64(1796238000000), int64(1796237000000), int64(0), []byte("payload"))
	f.Add(uint8(1), int64(0), int64(0), int64(1), []byte{})
	f.Add(uint8(2), int64(253402300799999), int64(1), int64(253402300799999), []byte("a:b:c:\x00"))
	f.Add(uint8(1), int64(5), int64(6), int64(7), []byte("f:1:2:3:p"))
	f.Add(uint8(0), int64(1), int64(2), int64(0), []byte{0xff, 0, ':', '\n', ':'})
	encode, err := os.ReadFile("../scripts/lua/includes/encode.lua")
	if err != nil {
		f.Fatal(err)
	}
	script := redis.NewScript(string(encode) + "\nreturn encode(ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5])")
	m := miniredis.RunT(f)
	c := redis.NewClient(&redis.Options{Addr: m.Addr()})
	f.Cleanup(func() { c.Close() })
	ctx := context.Background()
	const maxMs = 253402300799999 // 9999-12-31T23:59:59.999Z, ValidateDue's bound
	f.Fuzz(func(t *testing.T, state uint8, due, created, settled int64, payload []byte) {
		if due < 0 || created < 0 || settled < 0 || due > maxMs || created > maxMs || settled > maxMs {
			t.Skip()
		}
		st := []State{StateScheduled, StateFired, StateCancelled}[state%3]
		settledField := strconv.FormatInt(settled, 10)
		if st == StateScheduled {
			settledField = "" // a scheduled record has no settled time
		}
		rec, err := script.Run(ctx, c, nil, st.code(), strconv.FormatInt(due, 10), strconv.FormatInt(created, 10),
			settledField, payload).Text()
		if err != nil {
			t.Fatalf("encode: %v", err)
		}
		got, err := decodeRecord("id", rec)
		if err != nil {
			t.Fatalf("decodeRecord(%q): %v", rec, err)
		}
		want := Timer{ID: "id", State: st, Due: fromMillis(due), CreatedAt: fromMillis(created), Payload: payload}
		switch st {
		case StateFired:
			want.FiredAt = fromMillis(settled)
		case StateCancelled:
			want.CancelledAt = fromMillis(settled)
		}
		if got.ID != want.ID || got.State != want.State || !got.Due.Equal(want.Due) || !got.CreatedAt.Equal(want.CreatedAt) ||
			!got.FiredAt.Equal(want.FiredAt) || !got.CancelledAt.Equal(want.CancelledAt) || string(got.Payload) != string(want.Payload) {
			t.Fatalf("decodeRecord(%q) = %+v\nwant %+v", rec, got, want)
		}
		if !got.Due.Equal(time.UnixMilli(due)) {
			t.Fatalf("due %v, want %d ms", got.Due, due)
		}
	})
}
