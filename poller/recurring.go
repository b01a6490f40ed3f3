package poller

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/timerq/timerq/queue"
)

// Recurring schedules (queue.PutRecurring) need no process of their own:
// every poller arms the next occurrences of the schedules whose occurrences
// it just fired, and repairs, every RecurringRepairInterval, schedules whose
// firing worker died before arming. Both are idempotent, so any number of
// pollers may do it at once.
const (
	// RecurringRepairInterval is how often each poller runs the repair
	// pass, give or take a fifth so replicas do not run it together.
	RecurringRepairInterval = time.Second
	// recurringRepairBatch is how many schedules one repair call tops up.
	recurringRepairBatch = 256
)

// armFired arms what follows the occurrences res fired. Like a claim it is
// not cancelled with Run's context (its work is idempotent and short), but
// ClaimTimeout bounds it. A failure is logged: the repair pass catches up.
func (p *Poller) armFired(ctx context.Context, res queue.ClaimResult) {
	occurrence := false
	for _, f := range res.Fired {
		if _, _, ok := queue.ParseOccurrenceID(f.ID); ok {
			occurrence = true
			break
		}
	}
	if !occurrence {
		return
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.opts.ClaimTimeout)
	defer cancel()
	if _, err := p.q.ArmFired(cctx, res.Fired); err != nil {
		p.log.Warn("timerq: arming the next occurrences failed; the repair pass will", "err", err)
	}
}

// repairRecurring runs the repair pass until ctx ends.
func (p *Poller) repairRecurring(ctx context.Context) {
	t := time.NewTimer(jittered(RecurringRepairInterval))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for range 100 { // bounded: at most 25,600 schedules per pass
			cctx, cancel := context.WithTimeout(ctx, p.opts.ClaimTimeout)
			n, more, err := p.q.RepairRecurring(cctx, recurringRepairBatch, queue.DefaultRepairGrace)
			cancel()
			if err != nil {
				if ctx.Err() == nil {
					p.log.Warn("timerq: recurring repair failed; retrying", "err", err)
				}
				break
			}
			if n > 0 {
				p.log.Info("timerq: repaired recurring schedules whose next occurrence was not armed", "armed", n)
			}
			if !more {
				break
			}
		}
		t.Reset(jittered(RecurringRepairInterval))
	}
}

func jittered(d time.Duration) time.Duration {
	return d*4/5 + rand.N(d*2/5)
}
