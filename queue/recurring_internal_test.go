package queue

import (
	"context"
	"testing"

	"github.com/timerq/timerq/internal/redistest"
)

// A create that lost a race with another (both read "absent" before either
// wrote) must leave the winner's schedule as it is.
func TestRecurPutCreateRaceKeepsTheWinner(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		q, err := New(b.Client, Options{Namespace: redistest.Namespace(t)})
		if err != nil {
			t.Fatal(err)
		}
		defer q.Close()
		status, _, first, err := q.put(ctx, putArgs{op: "create", id: "s", body: `{"every_ms":1000}`, state: recActive, payload: []byte("winner")})
		if err != nil || status != "created" {
			t.Fatalf("first create: %s, %v", status, err)
		}
		status, _, rec, err := q.put(ctx, putArgs{op: "create", id: "s", body: `{"every_ms":2000}`, state: recActive, payload: []byte("loser")})
		if err != nil || status != "exists" || rec != first {
			t.Fatalf("second create: %s %q, %v; want exists with %q", status, rec, err, first)
		}
	})
}
