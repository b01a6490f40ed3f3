package poller

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/go-redsync/redsync/v4"

	"github.com/timerq/timerq/queue"
)

// maintain competes for the maintenance lock until ctx ends, running the
// maintenance tasks whenever it holds it.
func (p *Poller) maintain(ctx context.Context, stop context.CancelCauseFunc) {
	m := p.opts.Maintenance
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		// A fresh Mutex per attempt: a redsync Mutex is not safe to reuse
		// across owners, and hold keeps this one to a single goroutine.
		mu := p.rs.NewMutex(p.MaintenanceLockKey(), redsync.WithExpiry(m.LockExpiry), redsync.WithTries(1))
		err := mu.TryLockContext(ctx)
		switch {
		case err == nil:
			p.hold(ctx, mu, stop)
		case ctx.Err() != nil:
			return
		case !isTaken(err):
			// The claim loop already logs an outage once per backoff step.
			p.log.Debug("timerq: maintenance lock not acquired", "err", err)
		}
		// Jitter keeps replicas from trying in lock step.
		t.Reset(m.AcquireInterval/2 + rand.N(m.AcquireInterval/2+1))
	}
}

func isTaken(err error) bool {
	var taken *redsync.ErrTaken
	return errors.As(err, &taken) || errors.Is(err, redsync.ErrFailed)
}

// hold runs the maintenance tasks while mu is held, and returns when ctx ends
// (releasing the lock) or the lock is lost. Every task step is idempotent:
// redsync has no fencing tokens, so a holder that has lost the lock without
// knowing it yet may briefly overlap the next one.
func (p *Poller) hold(ctx context.Context, mu *redsync.Mutex, stop context.CancelCauseFunc) {
	m := p.opts.Maintenance
	p.log.Info("timerq: maintenance lock acquired", "key", mu.Name(), "expiry", m.LockExpiry)
	p.holding.Store(true)
	if h := p.opts.Hooks.Maintenance; h != nil {
		h(true)
	}
	// stopHolding reports the end of maintenance once. On a graceful stop it
	// runs before the release, so that no observer sees this poller still
	// holding after another has taken the lock.
	stopped := false
	stopHolding := func() {
		if stopped {
			return
		}
		stopped = true
		p.holding.Store(false)
		if h := p.opts.Hooks.Maintenance; h != nil {
			h(false)
		}
	}
	defer stopHolding()

	extendEvery := m.LockExpiry / 3
	lastExtend := time.Now()
	// keep extends the lock when an extension is due (or force is set) and
	// reports whether it is still held. Any failure to extend means the
	// lock is lost: redsync cannot tell "expired" from "taken".
	keep := func(force bool) bool {
		if !force && time.Since(lastExtend) < extendEvery {
			return time.Now().Before(mu.Until())
		}
		ectx, cancel := context.WithDeadline(context.WithoutCancel(ctx), mu.Until())
		ok, err := mu.ExtendContext(ectx)
		cancel()
		if !ok || err != nil {
			p.log.Warn("timerq: maintenance lock lost; stopping maintenance", "err", err)
			return false
		}
		lastExtend = time.Now()
		return true
	}

	extend := time.NewTicker(extendEvery)
	defer extend.Stop()
	purge := time.NewTimer(0)
	defer purge.Stop()
	stats := time.NewTimer(0)
	defer stats.Stop()
	for {
		select {
		case <-ctx.Done():
			stopHolding()
			uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
			_, err := mu.UnlockContext(uctx)
			cancel()
			if err != nil {
				p.log.Debug("timerq: maintenance lock release failed; it expires by itself", "err", err)
			} else {
				p.log.Info("timerq: maintenance lock released")
			}
			return
		case <-extend.C:
			if !keep(true) {
				return
			}
		case <-purge.C:
			if !p.purge(ctx, mu, keep, stop) {
				return
			}
			purge.Reset(m.PurgeInterval)
		case <-stats.C:
			if !keep(false) {
				return
			}
			p.sampleStats(ctx, mu)
			stats.Reset(m.StatsInterval)
		}
	}
}

// purge purges batches until none is left, checking the lock before each.
// It reports false when the lock was lost; a permission error stops Run.
func (p *Poller) purge(ctx context.Context, mu *redsync.Mutex, keep func(bool) bool, stop context.CancelCauseFunc) bool {
	total := 0
	defer func() {
		if h := p.opts.Hooks.Purged; h != nil {
			h(total)
		}
	}()
	for ctx.Err() == nil {
		if !keep(false) {
			return false
		}
		// Bounded by the lock's validity, so that a step does not run on
		// long after the lock may have passed to another replica.
		sctx, cancel := context.WithDeadline(ctx, mu.Until())
		n, more, err := p.q.Engine().Purge(sctx, queue.MaxBatch)
		cancel()
		total += n
		if err != nil && p.fatal(err, stop, "purge") {
			return true // Run stops; hold releases the lock as ctx ended
		}
		if err != nil {
			if ctx.Err() == nil {
				p.log.Warn("timerq: purge failed; retrying at the next purge interval", "err", err)
			}
			return true
		}
		if !more {
			break
		}
	}
	if total > 0 {
		p.log.Debug("timerq: purged settled timers", "removed", total)
	}
	return true
}

// sampleStats reads queue.Stats for Hooks.Stats.
func (p *Poller) sampleStats(ctx context.Context, mu *redsync.Mutex) {
	h := p.opts.Hooks.Stats
	if h == nil {
		return
	}
	sctx, cancel := context.WithDeadline(ctx, mu.Until())
	s, err := p.q.Stats(sctx)
	cancel()
	if err != nil {
		if ctx.Err() == nil {
			p.log.Debug("timerq: stats sample failed", "err", err)
		}
		return
	}
	h(s)
}
