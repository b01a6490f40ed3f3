// Package poller fires due timers: a Poller claims them from a queue.Queue in
// a loop, sleeping between claims until the next due time, and runs the
// namespace's maintenance when it holds the maintenance lock. Any number of
// pollers may run against one namespace; each timer fires exactly once.
//
// cmd/timerworker wraps a Poller in a binary; applications may also run one
// in-process.
package poller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"

	"github.com/timerq/timerq/queue"
)

// ErrRunning is returned by Run when the Poller is already running.
var ErrRunning = errors.New("poller: already running; use one Poller per concurrent Run")

// Poller claims due timers of one queue in a loop. Create it with New and
// call Run.
type Poller struct {
	q    *queue.Queue
	rdb  redis.UniversalClient
	opts Options
	log  *slog.Logger
	rs   *redsync.Redsync

	running   atomic.Bool
	lastClaim atomic.Int64 // local Unix nanoseconds of the last successful claim
	holding   atomic.Bool
	arms      chan []queue.Fired // fired occurrences, to armLoop (recurring.go)
}

// New returns a Poller for q. rdb must be the client q was created with (or
// one reaching the same Redis): the poller subscribes to q's wake channel
// and takes the maintenance lock through it. New does not contact Redis.
func New(q *queue.Queue, rdb redis.UniversalClient, opts Options) (*Poller, error) {
	if q == nil {
		return nil, fmt.Errorf("poller: %w: the queue is nil; pass one from queue.New", queue.ErrInvalidOptions)
	}
	if rdb == nil {
		return nil, fmt.Errorf("poller: %w: pass the client the queue was created with", queue.ErrNilClient)
	}
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	return &Poller{
		q:    q,
		rdb:  rdb,
		opts: opts,
		log:  opts.Logger.With("namespace", q.Namespace()),
		rs:   redsync.New(goredis.NewPool(rdb)),
	}, nil
}

// Options returns the poller's options with defaults filled in.
func (p *Poller) Options() Options { return p.opts }

// LastClaim returns the local time of the last successful claim, or the
// zero time if none succeeded yet. A recent one shows that Redis answers
// and the claim script runs, which is what readiness checks want.
func (p *Poller) LastClaim() time.Time {
	n := p.lastClaim.Load()
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n)
}

// HoldsMaintenance reports whether this poller holds the maintenance lock.
func (p *Poller) HoldsMaintenance() bool { return p.holding.Load() }

// MaintenanceLockKey returns the Redis key of the namespace's maintenance
// lock. It carries the namespace's hash tag, so it lives in the same
// Cluster slot as the queue.
func (p *Poller) MaintenanceLockKey() string {
	return "timerq:{" + p.q.Namespace() + "}:maint-lock"
}

// Run claims due timers until ctx ends, then lets the claim in flight finish,
// releases the maintenance lock if held, and returns nil. Redis errors are
// logged and retried with backoff (an outage, LOADING, a timeout), except a
// refusal for lack of an ACL right, which no retry can fix: then Run stops
// as if ctx ended and returns that error, wrapping queue.ErrPermission and
// naming the right. It returns ErrRunning if the Poller is already running.
func (p *Poller) Run(ctx context.Context) error {
	if !p.running.CompareAndSwap(false, true) {
		return ErrRunning
	}
	defer p.running.Store(false)
	ctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	var wg sync.WaitGroup
	if !p.opts.Maintenance.Disabled {
		wg.Go(func() { p.maintain(ctx, stop) })
	}
	p.arms = make(chan []queue.Fired, 16)
	wg.Go(func() { p.repairRecurring(ctx) })
	wg.Go(func() { p.armLoop(ctx) })
	p.poll(ctx, stop)
	wg.Wait()
	if err := context.Cause(ctx); errors.Is(err, queue.ErrPermission) {
		return err
	}
	return nil
}

// fatal reports whether err is one that stops Run (see Run), and if so
// stops it.
func (p *Poller) fatal(err error, stop context.CancelCauseFunc, what string) bool {
	if !errors.Is(err, queue.ErrPermission) {
		return false
	}
	p.log.Error("timerq: Redis refused a "+what+" for lack of an ACL right; stopping, as retrying cannot help", "err", err)
	stop(err)
	return true
}

// poll is the claim loop.
//
// Sleep targets are kept in the server's clock: after a claim, the poller
// sleeps NextDue-Now (both server times) and remembers the local monotonic
// instant the reply arrived, so that a wake message (a server due time) can
// be compared with, and converted to, a local sleep without ever trusting
// the local wall clock.
func (p *Poller) poll(ctx context.Context, stop context.CancelCauseFunc) {
	// Subscribe first: the SUBSCRIBE is sent before the first claim, and its
	// confirmation triggers another claim, so a wake published between the
	// two cannot be missed.
	ps := p.rdb.Subscribe(ctx, p.q.WakeChannel())
	all := ps.ChannelWithSubscriptions(
		redis.WithChannelSize(1024),
		// Short health-check timeouts: the reconnect holds the PubSub's
		// lock, and Close waits for it at shutdown.
		redis.WithChannelPingTimeout(time.Second),
		redis.WithChannelReconnectTimeout(time.Second),
	)
	defer func() {
		_ = ps.Close()
		// The receiving goroutine exits once it sees the close; drain so it
		// never blocks on a full channel.
		for range all {
		}
	}()
	msgs := all // set to nil once closed (the client was closed), but drained via all

	timer := time.NewTimer(0)
	defer timer.Stop()
	var (
		target    int64     // server ms the current sleep ends at
		refServer int64     // server ms of the last claim
		refLocal  time.Time // local instant its reply arrived
		failures  int
	)
	for {
		select {
		case <-ctx.Done():
			return
		case m, ok := <-msgs:
			if !ok {
				msgs = nil
				continue
			}
			if failures > 0 {
				continue // backing off: the next claim comes with the backoff
			}
			switch m := m.(type) {
			case *redis.Subscription:
				// Confirmed, or resubscribed after a reconnect: wake messages
				// published while unsubscribed are lost, so claim now.
				if m.Kind == "subscribe" {
					target = 0
					timer.Reset(0)
				}
			case *redis.Message:
				due, err := strconv.ParseInt(m.Payload, 10, 64)
				if err != nil || due >= target {
					continue
				}
				target = due
				serverNow := refServer + time.Since(refLocal).Milliseconds()
				timer.Reset(max(time.Duration(due-serverNow)*time.Millisecond, 0))
			}
		case <-timer.C:
			res, err := p.claim(ctx)
			if err != nil && p.fatal(err, stop, "claim") {
				return
			}
			if err != nil {
				failures++
				d := p.backoff(failures)
				p.log.Warn("timerq: claim failed; retrying", "attempt", failures, "retry_in", d, "err", err)
				timer.Reset(d)
				continue
			}
			if failures > 0 {
				p.log.Info("timerq: claims succeed again", "failed_attempts", failures)
				failures = 0
			}
			refServer, refLocal = res.Now.UnixMilli(), time.Now()
			p.armFired(ctx, res)
			if len(res.Fired) >= p.opts.BatchSize {
				target = 0 // backlog: claim again at once
				timer.Reset(0)
				continue
			}
			sleep := p.opts.MaxPollInterval
			if !res.NextDue.IsZero() {
				sleep = min(sleep, max(res.NextDue.Sub(res.Now), 0))
			}
			target = refServer + sleep.Milliseconds()
			timer.Reset(sleep)
		}
	}
}

// claim runs one claim. Its context is not cancelled with Run's, so that a
// claim in flight when Run is stopped completes (its timers have fired
// whether or not the reply arrives), but ClaimTimeout bounds it.
func (p *Poller) claim(ctx context.Context) (queue.ClaimResult, error) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.opts.ClaimTimeout)
	defer cancel()
	res, err := p.q.Claim(cctx, p.opts.BatchSize)
	if err != nil {
		if h := p.opts.Hooks.ClaimFailed; h != nil {
			h(err)
		}
		return res, err
	}
	p.lastClaim.Store(time.Now().UnixNano())
	if h := p.opts.Hooks.Claimed; h != nil {
		h(res)
	}
	return res, nil
}

// backoff returns the delay before retry n (1-based): exponential from
// BackoffMin, capped at BackoffMax, with equal jitter so that replicas that
// failed together do not retry together.
func (p *Poller) backoff(n int) time.Duration {
	return backoff(p.opts.BackoffMin, p.opts.BackoffMax, n)
}

func backoff(lo, hi time.Duration, n int) time.Duration {
	d := hi
	if n < 32 {
		d = min(lo<<(n-1), hi)
	}
	half := d / 2
	return half + rand.N(half+1)
}
