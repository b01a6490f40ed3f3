package queue_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/queue"
)

// StreamMaxLen's special values are named: 0 is the default bound,
// Unbounded turns trimming off, and any other negative value is refused.
func TestStreamMaxLenUnboundedKeepsEveryFire(t *testing.T) {
	t.Parallel() // its own namespace on each backend; see docs/development.md, "Loops"
	ctx := context.Background()
	_, rdb := redistest.Mini(t)
	const fires = 300
	xlen := func(maxLen int64) int64 {
		t.Helper()
		q, err := queue.New(rdb, queue.Options{Namespace: redistest.Namespace(t) + fmt.Sprint(maxLen), StreamMaxLen: maxLen})
		if err != nil {
			t.Fatal(err)
		}
		defer q.Close()
		if maxLen == 0 && q.Options().StreamMaxLen != queue.DefaultStreamMaxLen {
			t.Fatalf("StreamMaxLen 0 became %d, want DefaultStreamMaxLen", q.Options().StreamMaxLen)
		}
		if maxLen == queue.Unbounded && q.Options().StreamMaxLen != queue.Unbounded {
			t.Fatalf("Options() reports StreamMaxLen %d, want Unbounded", q.Options().StreamMaxLen)
		}
		var last queue.Timer
		for i := range fires {
			res, err := q.ScheduleIn(ctx, fmt.Sprintf("t%d", i), 0, nil)
			if err != nil {
				t.Fatal(err)
			}
			last = res.Timer
		}
		// The claims below stop at the first that finds nothing, so every
		// timer must be due by the server's clock before the first.
		redistest.AwaitServerTime(t, rdb, last.Due)
		for {
			res, err := q.Engine().Claim(ctx, queue.MaxBatch)
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Fired) == 0 {
				break
			}
		}
		n, err := rdb.XLen(ctx, q.Keys().Stream(0)).Result()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := xlen(queue.Unbounded); n != fires {
		t.Errorf("Unbounded stream holds %d entries, want all %d", n, fires)
	}
	if n := xlen(0); n != fires {
		t.Errorf("default-bounded stream holds %d entries, want all %d (under the bound)", n, fires)
	}
	if n := xlen(10); n >= fires {
		t.Errorf("a stream bounded to 10 holds %d entries, want it trimmed", n)
	}
	if _, err := queue.New(rdb, queue.Options{StreamMaxLen: queue.Unbounded - 1}); err == nil {
		t.Error("StreamMaxLen -2 was accepted")
	}
}
