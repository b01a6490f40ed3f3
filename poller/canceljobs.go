package poller

import (
	"context"
	"errors"
	"time"

	"github.com/timerq/timerq/queue"
)

// CancelJobsInterval is how often each poller looks for bulk cancel jobs
// left to the workers (queue.Queue.CancelMatching hands over those too
// large for the call) and runs those no other runner holds
// (queue.Engine.RunCancelJobs). An idle look is one ZRANGE and one
// ZRANGEBYSCORE.
const CancelJobsInterval = time.Second

// runCancelJobs runs the namespace's bulk cancel jobs until ctx ends. Each
// job runs under a lease, so a job whose runner died is resumed by a
// poller about queue.DefaultCancelLease later, where its last step ended.
func (p *Poller) runCancelJobs(ctx context.Context) {
	p.every(ctx, CancelJobsInterval, func(ctx context.Context) error {
		n, err := p.q.Engine().RunCancelJobs(ctx, queue.DefaultCancelLease)
		if err == nil && n > 0 {
			p.log.Info("timerq: bulk cancel jobs finished", "jobs", n)
		}
		return err
	}, func(err error) {
		lvl := "retrying with backoff"
		if errors.Is(err, queue.ErrPermission) {
			lvl = "grant the right named; retrying with backoff"
		}
		p.log.Warn("timerq: bulk cancel job failed; "+lvl, "err", err)
	})
}
