package queue_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/queue"
)

// Tests of the owners' edges: what the HTTP API, timerctl and export
// found of the library's owners, labels and epochs.

// TestCancelMatchingEpochBelowNeedsOwner: an epoch bound selects an
// owner's timers by the epoch they were scheduled under. Without an owner
// or labels a bulk cancel scans the records, which know no epoch, so the
// bound would be ignored and every timer of the prefix cancelled: such a
// filter is refused, and cancels nothing.
func TestCancelMatchingEpochBelowNeedsOwner(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		q := newQueue(t, b, queue.Options{})
		due := time.Now().Add(time.Hour)
		if _, err := q.BumpEpoch(ctx, "wf", queue.BumpOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := q.ScheduleBatch(ctx, []queue.NewTimer{{ID: "p-new", Due: due, Owner: "wf", Epoch: 1}, {ID: "p-plain", Due: due}}); err != nil {
			t.Fatal(err)
		}
		job, err := q.CancelMatching(ctx, queue.CancelFilter{IDPrefix: "p-", EpochBelow: 1})
		if !errors.Is(err, queue.ErrInvalidFilter) {
			t.Errorf("CancelMatching by prefix and epoch alone: %+v %v, want ErrInvalidFilter", job, err)
		}
		for _, id := range []string{"p-new", "p-plain"} {
			if tm, err := q.Get(ctx, id); err != nil || tm.State != queue.StateScheduled {
				t.Errorf("%s: %v %v, want it left scheduled", id, tm.State, err)
			}
		}
	})
}

// TestRestoreRaisesTheOwnersEpoch: restored timers of an owner raise its
// epoch to at least theirs, on whichever shard they land: Epoch reads it,
// BumpEpoch goes past it, and a timer scheduled under the bumped epoch is
// taken on every shard.
func TestRestoreRaisesTheOwnersEpoch(t *testing.T) {
	redistest.ForEachAll(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		q := newQueue(t, b, queue.Options{})
		now := serverNow(t, b).Truncate(time.Millisecond)
		// One timer of the owner, at epoch 5, on some shard.
		in := queue.Timer{ID: "restored", State: queue.StateScheduled, Due: now.Add(time.Hour), CreatedAt: now, Owner: "wf", Epoch: 5}
		if res, err := q.Restore(ctx, []queue.Timer{in}); err != nil || !res[0].Created {
			t.Fatalf("Restore: %+v %v", res, err)
		}
		if e, err := q.Epoch(ctx, "wf"); err != nil || e < 5 {
			t.Errorf("Epoch after restoring a timer of epoch 5: %d %v, want at least 5", e, err)
		}
		bumped, err := q.BumpEpoch(ctx, "wf", queue.BumpOptions{})
		if err != nil || bumped.Epoch <= 5 {
			t.Fatalf("BumpEpoch after the restore: %+v %v, want past 5", bumped, err)
		}
		var batch []queue.NewTimer
		for i := range 40 {
			batch = append(batch, queue.NewTimer{ID: fmt.Sprint("new-", i), Due: now.Add(time.Hour), Owner: "wf", Epoch: bumped.Epoch})
		}
		if _, err := q.ScheduleBatch(ctx, batch); err != nil {
			t.Fatalf("schedule under the bumped epoch %d: %v", bumped.Epoch, err)
		}
	})
}

// TestStaleEpochIsNotAnUnknownOutcome: a create refused for a stale epoch
// was refused by the script before any write, so its error says so and
// does not also say "outcome unknown: retry with the same ID", which a
// retry under the same epoch would only repeat.
func TestStaleEpochIsNotAnUnknownOutcome(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		q := newQueue(t, b, queue.Options{})
		if _, err := q.BumpEpoch(ctx, "wf", queue.BumpOptions{}); err != nil {
			t.Fatal(err)
		}
		_, err := q.ScheduleBatch(ctx, []queue.NewTimer{{ID: "z", Due: time.Now().Add(time.Hour), Owner: "wf", Epoch: 3}})
		if !errors.Is(err, queue.ErrStaleEpoch) || errors.Is(err, queue.ErrOutcomeUnknown) {
			t.Fatalf("schedule under a stale epoch: %v, want ErrStaleEpoch and not ErrOutcomeUnknown", err)
		}
	})
}
