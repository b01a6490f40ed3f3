package main

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/queue"
)

// TestWorkerBulkCancelSurvivesKill: a 100,000-timer bulk cancel by owner on a
// sharded namespace goes to the workers; the worker running it is
// SIGKILLed mid-way, and another, once the dead one's lease lapsed,
// finishes it with exact counts.
func TestWorkerBulkCancelSurvivesKill(t *testing.T) {
	t.Parallel() // servers of its own; see docs/development.md, "Loops"
	srv := redistest.Start(t, redistest.Config{})
	rdb := srv.Client(t)
	ctx := context.Background()
	ns := redistest.Namespace(t)
	if _, err := queue.CreateNamespace(ctx, rdb, ns, 4); err != nil {
		t.Fatal(err)
	}
	q, err := queue.New(rdb, queue.Options{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	const n = 100000
	batch := make([]queue.NewTimer, n)
	for i := range batch {
		batch[i] = queue.NewTimer{ID: fmt.Sprint("wf/", i), Due: time.Now().Add(time.Hour), Owner: "wf"}
	}
	if _, err := q.ScheduleBatch(ctx, batch); err != nil {
		t.Fatal(err)
	}
	// Another owner's timer, under the same ID prefix: the job selects by
	// owner (the owner index), as a durable-execution engine cancels a
	// workflow's timers.
	if _, err := q.ScheduleBatch(ctx, []queue.NewTimer{{ID: "wf/other", Due: time.Now().Add(time.Hour), Owner: "wf2"}}); err != nil {
		t.Fatal(err)
	}
	job, err := q.CancelMatching(ctx, queue.CancelFilter{Owner: "wf"})
	if err != nil {
		t.Fatal(err)
	}
	if job.State != queue.CancelJobRunning {
		t.Fatalf("job = %+v, want it handed to the workers", job)
	}
	inCall := job.Counts.Cancelled
	read := func() queue.CancelJob {
		j, err := q.CancelJobs().Get(ctx, job.ID)
		if err != nil {
			t.Fatal(err)
		}
		return j
	}

	args := []string{"--redis", srv.URL(), "--namespace", ns}
	a := startWorker(t, args...)
	waitFor(t, 20*time.Second, "the worker to start on the job", func() bool { return read().Counts.Cancelled > inCall })
	a.kill()
	mid := read()
	if mid.State != queue.CancelJobRunning {
		t.Fatalf("the job ended before the kill (%+v): nothing left to resume", mid)
	}
	b := startWorker(t, args...)
	waitFor(t, 30*time.Second, "another worker to finish the job", func() bool { return read().State == queue.CancelJobDone })
	end := read()
	t.Logf("%d cancelled in the call, %d when the worker was killed; the job took %v in all", inCall, mid.Counts.Cancelled, end.Finished.Sub(end.Created))
	if end.Counts != (queue.CancelCounts{Cancelled: n}) || end.ShardsDone != 4 {
		t.Fatalf("job = %+v, want %d cancelled and nothing else, on 4 shards", end, n)
	}
	s, err := q.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if s.Cancelled != n || s.Scheduled != 1 {
		t.Fatalf("stats: %d cancelled, %d scheduled; want %d and the 1 other", s.Cancelled, s.Scheduled, n)
	}
	if code, _ := b.term(); code != 0 {
		t.Errorf("worker exit %d; log:\n%s", code, b.logText())
	}
}
