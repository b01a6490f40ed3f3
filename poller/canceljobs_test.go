package poller_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/poller"
	"github.com/timerq/timerq/queue"
)

// TestPollerRunsCancelJobs: a bulk cancel too large for the call is
// handed to the workers, and a running poller finishes it.
func TestPollerRunsCancelJobs(t *testing.T) {
	// More than queue.CancelInCall timers: the real server only.
	s := redistest.SharedServer(t)
	c := s.Client(t)
	ctx := context.Background()
	q := newQueue(t, c, redistest.Namespace(t))
	n := queue.CancelInCall + 2000
	batch := make([]queue.NewTimer, n)
	for i := range batch {
		batch[i] = queue.NewTimer{ID: fmt.Sprint("bulk/", i), Due: time.Now().Add(time.Hour)}
	}
	if _, err := q.ScheduleBatch(ctx, batch); err != nil {
		t.Fatal(err)
	}
	job, err := q.CancelMatching(ctx, queue.CancelFilter{IDPrefix: "bulk/"})
	if err != nil {
		t.Fatal(err)
	}
	if job.State != queue.CancelJobRunning {
		t.Fatalf("job = %+v, want it handed to the workers", job)
	}
	p, err := poller.New(q, poller.Options{})
	if err != nil {
		t.Fatal(err)
	}
	start(t, p)
	waitFor(t, 10*time.Second, "the poller finishes the job", func() bool {
		j, err := q.CancelJobs().Get(ctx, job.ID)
		if err != nil {
			t.Fatal(err)
		}
		job = j
		return j.State == queue.CancelJobDone
	})
	if job.Counts != (queue.CancelCounts{Cancelled: int64(n)}) {
		t.Fatalf("counts %+v, want %d cancelled", job.Counts, n)
	}
}
