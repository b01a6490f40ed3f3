package queue_test

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/queue"
)

// TestScheduleBatchResultsMatchRecords: a batch of more than two script
// calls' worth in one shard, whose calls run in flight at once, returns
// for each timer what Get then reads: the record it created (with an
// absolute or a relative due time, which the script alone resolves), or
// the existing one. An ID repeated within a call and across calls is
// created once, by its first occurrence, whose record every repeat gets.
func TestScheduleBatchResultsMatchRecords(t *testing.T) {
	t.Parallel() // its own namespace on each backend; see docs/development.md, "Loops"
	redistest.ForEachAll(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		q := newQueue(t, b, queue.Options{})
		shard, err := q.Inspect().ShardOf(ctx, "x")
		if err != nil {
			t.Fatal(err)
		}
		// IDs of x's shard, so that one shard gets several calls.
		var ids []string
		for i := 0; len(ids) < 1300; i++ {
			id := fmt.Sprintf("t-%d", i)
			if k, _ := q.Inspect().ShardOf(ctx, id); k == shard {
				ids = append(ids, id)
			}
		}
		due := time.Now().Add(time.Hour).Truncate(time.Millisecond)
		if _, err := q.Schedule(ctx, ids[3], due, []byte("old")); err != nil {
			t.Fatal(err)
		}
		var batch []queue.NewTimer
		for i, id := range ids {
			switch {
			case i%3 == 0:
				batch = append(batch, queue.NewTimerIn(id, time.Duration(i)*time.Second+time.Microsecond, []byte("in")))
			case i%7 == 0:
				batch = append(batch, queue.NewTimer{ID: id, Due: due.Add(time.Duration(i) * time.Millisecond)}) // no payload
			default:
				batch = append(batch, queue.NewTimer{ID: id, Due: due.Add(time.Duration(i) * time.Millisecond), Payload: []byte(id)})
			}
			if i == 0 || i == 1 {
				// x's first occurrence; the second repeats it in the same call.
				batch = append(batch, queue.NewTimer{ID: "x", Due: due.Add(time.Duration(i) * time.Minute), Payload: fmt.Appendf(nil, "x%d", i)})
			}
		}
		// Repeats of x in later calls, and of a relative timer.
		batch = append(batch, queue.NewTimer{ID: "x", Due: due, Payload: []byte("late")}, queue.NewTimerIn(ids[6], time.Minute, nil))
		res, err := q.ScheduleBatch(ctx, batch)
		if err != nil {
			t.Fatal(err)
		}
		if len(res) != len(batch) {
			t.Fatalf("%d results for %d timers", len(res), len(batch))
		}
		firstX, oldAt := -1, -1
		seen := map[string]int{}
		for i, r := range res {
			id := batch[i].ID
			first, repeat := seen[id]
			if !repeat {
				seen[id] = i
				first = i
			}
			if id == "x" && firstX < 0 {
				firstX = i
			}
			if id == ids[3] {
				oldAt = i
			}
			wantCreated := !repeat && id != ids[3]
			if r.Created != wantCreated {
				t.Fatalf("result %d (%s): created %v, want %v", i, id, r.Created, wantCreated)
			}
			got, err := q.Get(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(r.Timer, got) {
				t.Fatalf("result %d (%s) = %+v, but Get reads %+v", i, id, r.Timer, got)
			}
			if repeat && !reflect.DeepEqual(r.Timer, res[first].Timer) {
				t.Fatalf("repeat %d of %s = %+v, want its first occurrence's %+v", i, id, r.Timer, res[first].Timer)
			}
		}
		x := res[firstX].Timer
		if string(x.Payload) != "x0" || !x.Due.Equal(due) {
			t.Fatalf("x = %+v, want its first occurrence's payload x0 and due %v", x, due)
		}
		if old := res[oldAt].Timer; string(old.Payload) != "old" || !old.Due.Equal(due) {
			t.Fatalf("the existing timer came back as %+v", old)
		}
		// A result's payload is a copy: changing it changes no other.
		res[firstX].Timer.Payload[0] = '!'
		if string(batch[firstX].Payload) != "x0" || string(res[len(res)-2].Timer.Payload) != "x0" {
			t.Fatal("a result's payload shares memory with the batch or another result")
		}
	})
}
