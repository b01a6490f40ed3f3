package poller

import (
	"context"
	"time"

	"github.com/timerq/timerq/queue"
)

// Recurring schedules (queue.RecurringTimers.Put) need no process of their own:
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

// armFired hands the occurrences res fired to the arming goroutine, so the
// next claim does not wait for two more round trips. Ahead (2 by default)
// leaves at least one interval of slack, and the repair pass covers a crash
// in between. When the arming falls behind, the claim loop waits for room:
// back-pressure rather than a growing backlog of unarmed schedules.
func (p *Poller) armFired(res queue.ClaimResult) {
	var occ []queue.Fired
	for _, f := range res.Fired {
		if _, _, ok := queue.ParseOccurrenceID(f.ID); ok {
			occ = append(occ, f)
		}
	}
	if len(occ) == 0 {
		return
	}
	p.arms <- occ
}

// armLoop arms what the claim loops fired, merging whatever has queued up
// into one call, until claimsDone is closed, which Run does once every
// claim loop has returned; then it arms what is left and returns.
func (p *Poller) armLoop(claimsDone <-chan struct{}) {
	for {
		var batch []queue.Fired
		select {
		case <-claimsDone:
			for {
				select {
				case f := <-p.arms:
					batch = append(batch, f...)
				default:
					if len(batch) > 0 {
						p.armNow(batch)
					}
					return
				}
			}
		case f := <-p.arms:
			batch = f
		}
	more:
		for len(batch) < 4*recurringRepairBatch {
			select {
			case f := <-p.arms:
				batch = append(batch, f...)
			default:
				break more
			}
		}
		p.armNow(batch)
	}
}

// armNow arms what follows fired. Like a claim it is not cancelled when
// Run stops (its work is idempotent and short), but ClaimTimeout bounds it.
// A failure is logged: the repair pass catches up.
func (p *Poller) armNow(fired []queue.Fired) {
	cctx, cancel := context.WithTimeout(context.Background(), p.opts.ClaimTimeout)
	defer cancel()
	if _, err := p.q.Engine().ArmFired(cctx, fired); err != nil {
		p.log.Warn("timerq: arming the next occurrences failed; the repair pass will", "err", err)
	}
}

// repairRecurring runs the repair pass until ctx ends, over the shards
// the poller owns: each shard's schedules live in that shard, beside their
// occurrences, so the owner of a shard (every poller, for an unsharded
// namespace) repairs its schedules, and a shard handed to another worker
// is repaired by that one.
func (p *Poller) repairRecurring(ctx context.Context) {
	p.every(ctx, RecurringRepairInterval, p.repairOwned, func(err error) {
		p.log.Warn("timerq: recurring repair failed; retrying with backoff", "err", err)
	})
}

// repairOwned runs one repair pass over the shards the poller owns and
// returns the first error.
func (p *Poller) repairOwned(ctx context.Context) error {
	owned := p.OwnedShards()
	var firstErr error
	if len(owned) > 1 {
		// Only the shards holding active schedules: on a sharded
		// namespace with few schedules, an idle pass is one pipeline.
		cctx, cancel := context.WithTimeout(ctx, p.opts.ClaimTimeout)
		owned, firstErr = p.q.Engine().ScheduleShards(cctx, owned)
		cancel()
	}
	for _, k := range owned {
		if err := p.repairShard(ctx, k); err != nil && firstErr == nil {
			firstErr = err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	return firstErr
}

// repairShard runs one repair pass over shard k's schedules.
func (p *Poller) repairShard(ctx context.Context, k int) error {
	for range 100 { // bounded: at most 25,600 schedules per shard and pass
		cctx, cancel := context.WithTimeout(ctx, p.opts.ClaimTimeout)
		n, more, err := p.q.Engine().RepairRecurringShard(cctx, k, recurringRepairBatch, queue.DefaultRepairGrace)
		cancel()
		if err != nil {
			return err
		}
		if n > 0 {
			p.log.Info("timerq: repaired recurring schedules whose next occurrence was not armed", "shard", k, "armed", n)
		}
		if !more {
			return nil
		}
	}
	return nil
}
