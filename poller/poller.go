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
	"hash/fnv"
	"log/slog"
	"math"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"

	"github.com/timerq/timerq/internal/errtext"
	"github.com/timerq/timerq/internal/keyspace"
	"github.com/timerq/timerq/internal/shardsub"
	"github.com/timerq/timerq/internal/sleep"
	"github.com/timerq/timerq/queue"
)

// ErrRunning is returned by Run when the Poller is already running.
var ErrRunning = errors.New("timerq: poller: already running; use one Poller per concurrent Run")

// Poller claims due timers of one queue in a loop. Create it with New and
// call Run.
type Poller struct {
	q    *queue.Queue
	rdb  redis.UniversalClient
	opts Options
	log  *slog.Logger
	rs   *redsync.Redsync
	// cluster is set on a Redis Cluster client, whose failed master is
	// replaced within seconds (see FailoverBackoffMax).
	cluster bool

	running   atomic.Bool
	lastClaim atomic.Int64 // local Unix nanoseconds of the last successful claim
	holding   atomic.Bool
	arms      chan []queue.Fired // fired occurrences, to armLoop (recurring.go)

	ownedMu sync.Mutex
	owned   []int // shards claimed now
}

// New returns a Poller for q. The poller reaches Redis through q's client
// (queue.Queue.Client): it claims, subscribes to q's wake channels,
// heartbeats and takes the maintenance lock there. New does not contact
// Redis.
func New(q *queue.Queue, opts Options) (*Poller, error) {
	if q == nil {
		return nil, errtext.Errorf("poller: %w: the queue is nil; pass one from queue.New", queue.ErrInvalidOptions)
	}
	rdb := q.Client()
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	return &Poller{
		q:       q,
		rdb:     rdb,
		opts:    opts,
		log:     opts.Logger.With("namespace", q.Namespace()),
		rs:      redsync.New(goredis.NewPool(rdb)),
		cluster: isCluster(rdb),
	}, nil
}

func isCluster(rdb redis.UniversalClient) bool {
	_, ok := rdb.(*redis.ClusterClient)
	return ok
}

// Options returns the poller's options with defaults filled in.
func (p *Poller) Options() Options { return p.opts }

// LastClaim returns the local time of the last successful claim (or, for
// a poller that owns no shard of a sharded namespace, of its last
// heartbeat), or the zero time if none succeeded yet. A recent one shows
// that Redis answers and the claim script runs, which is what readiness
// checks want.
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
// lock. It carries the namespace's hash tag.
func (p *Poller) MaintenanceLockKey() string {
	return keyspace.Namespace(p.q.Namespace()).MaintLock()
}

// WorkerID returns the ID under which the poller heartbeats.
func (p *Poller) WorkerID() string { return p.opts.WorkerID }

// OwnedShards returns the shards the poller claims now, in order.
func (p *Poller) OwnedShards() []int {
	p.ownedMu.Lock()
	defer p.ownedMu.Unlock()
	return append([]int(nil), p.owned...)
}

// Run claims due timers until ctx ends, then lets the claims in flight
// finish, leaves the namespace's membership, releases the maintenance lock
// if held, and returns nil. It never returns because of a Redis error:
// those are logged and retried with backoff. It returns ErrRunning if the
// Poller is already running.
//
// The poller claims only the shards it owns (see Options.FixedShards): the
// live workers share the shards by rendezvous hashing over the membership
// list in Redis, which each renews every Options.Heartbeat. A worker that
// dies drops out after Options.MemberTTL and its shards go to the others;
// until then, the others claim its shards once their timers are
// Options.Takeover.After overdue (see TakeoverOptions). This holds for an
// unsharded namespace too, whose one shard has one owner and is watched by
// the other workers; with the takeover disabled every poller claims that
// one shard, as before sharding.
//
// The poller follows the namespace's layout: when its heartbeat (or, with
// no membership, a read at most every Options.Heartbeat) finds another
// shard count, as when the namespace is created after Run started, it
// stops its claim loops and starts them again on the new shards, with
// their wake subscriptions, staying a member throughout.
//
// Redis errors are logged and retried with backoff (an outage, LOADING, a
// timeout, a slot migration), except a refusal for lack of an ACL right,
// which no retry can fix: then Run stops as if ctx ended and returns that
// error, wrapping queue.ErrPermission and naming the right.
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
	wg.Go(func() { p.watchReplicas(ctx) })
	wg.Go(func() { p.runCancelJobs(ctx) })
	// The arm loop outlives the claim loops, which hand it what their
	// last claims fired: ending it with ctx lost those arms on every stop.
	claimsDone := make(chan struct{})
	wg.Go(func() { p.armLoop(claimsDone) })
	p.serve(ctx, stop)
	close(claimsDone)
	wg.Wait()
	if err := context.Cause(ctx); errors.Is(err, queue.ErrPermission) {
		return err
	}
	return nil
}

// serve runs serveLayout until ctx ends, again each time the namespace's
// shard count changes (a namespace created after the poller started).
func (p *Poller) serve(ctx context.Context, stop context.CancelCauseFunc) {
	for p.serveLayout(ctx, stop) {
	}
}

// serveLayout reads the namespace's layout, then runs one claim loop per
// owned shard, adjusting the set on every heartbeat, until ctx ends, or
// until the shard count changes, when it stops its loops and reports true.
func (p *Poller) serveLayout(ctx context.Context, stop context.CancelCauseFunc) (changed bool) {
	shards, sharded, ok := p.readLayout(ctx, stop)
	if !ok {
		return false
	}
	// With takeover, every shard has a loop: the owned ones claim as due,
	// the others watch (see TakeoverOptions). That holds for the one shard
	// of an unsharded namespace too: one worker claims it and the others
	// watch, so its claims do not grow with the number of workers.
	watch := p.opts.FixedShards == nil && !p.opts.Takeover.Disabled
	loops := newShardLoops(ctx, p, stop, shards, sharded, watch)
	switch {
	case p.opts.FixedShards != nil:
		loops.setOwned(p.fixedShards(shards))
		changed = p.watchLayout(ctx, shards)
	case shards == 1 && !watch:
		// Without the takeover a dead owner's one shard would wait for its
		// membership to lapse: every poller claims it, as before ownership.
		loops.setOwned([]int{0})
		changed = p.watchLayout(ctx, shards)
	default:
		changed = p.membership(ctx, shards, loops.setOwned, stop)
	}
	loops.close()
	if changed {
		n, _ := p.q.Inspect().Shards(ctx)
		p.log.Info("timerq: the namespace's shard count changed; restarting the claim loops", "was", shards, "now", n)
	}
	return changed
}

// readLayout reads the namespace's shard count and whether its server
// takes SPUBLISH, retrying with backoff; ok is false if ctx ended or the
// read was refused for good (see fatal) first.
func (p *Poller) readLayout(ctx context.Context, stop context.CancelCauseFunc) (shards int, sharded, ok bool) {
	for failures := 1; ; failures++ {
		// Reading the layout is the first step of every claim: report its
		// failures as failed claims, with the same backoff.
		n, err := p.q.Inspect().Shards(ctx)
		if err == nil {
			sharded, _ = p.q.Engine().ShardedPubSub(ctx)
			if failures > 1 {
				p.log.Info("timerq: claims succeed again", "failed_attempts", failures-1)
			}
			return n, sharded, true
		}
		if ctx.Err() != nil || p.fatal(err, stop, "read of the namespace's layout") {
			return 0, false, false
		}
		if h := p.opts.Hooks.ClaimFailed; h != nil {
			h(err)
		}
		d := p.backoff(failures)
		p.log.Warn("timerq: claim failed; retrying", "attempt", failures, "retry_in", d, "err", err)
		if !sleep.For(ctx, d) {
			return 0, false, false
		}
	}
}

// fixedShards returns the shards of Options.FixedShards that the namespace has
// (of shards), logging the others.
func (p *Poller) fixedShards(shards int) []int {
	var fixed []int
	for _, k := range p.opts.FixedShards {
		if k < shards {
			fixed = append(fixed, k)
		} else {
			p.log.Error("timerq: Options.FixedShards names a shard the namespace does not have; ignoring it", "shard", k, "shards", shards)
		}
	}
	return fixed
}

// layoutChanged reports whether the queue's layout, re-read from Redis at
// most once per layoutTTL (queue.Inspector.Shards), now has another shard count
// than shards.
func (p *Poller) layoutChanged(ctx context.Context, shards int) bool {
	n, err := p.q.Inspect().Shards(ctx)
	return err == nil && n != shards
}

// watchLayout waits until ctx ends, reporting false, or the namespace's
// shard count is no longer shards, reporting true. It checks every
// Options.Heartbeat (an HMGET at most once a second): the poller modes
// without a membership have no heartbeat to read it with.
func (p *Poller) watchLayout(ctx context.Context, shards int) bool {
	tick := time.NewTicker(p.opts.Heartbeat)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return false
		case <-tick.C:
			if p.layoutChanged(ctx, shards) {
				return true
			}
		}
	}
}

// membership heartbeats every Options.Heartbeat and gives setOwned the
// shards this worker wins by rendezvous hashing among the live members.
// Until the first heartbeat succeeds it claims every shard: ownership only
// saves work, so overlap is safe, and a lone worker must not sit idle.
// The heartbeat also reads the namespace's meta key: when the shard count
// changes, membership returns true, staying a member for the next layout.
func (p *Poller) membership(ctx context.Context, shards int, setOwned func([]int), stop context.CancelCauseFunc) (changed bool) {
	all := make([]int, shards)
	for k := range all {
		all[k] = k
	}
	beat := func(ctx context.Context, leave bool) ([]string, error) {
		cctx, cancel := context.WithTimeout(ctx, p.opts.ClaimTimeout)
		defer cancel()
		return p.q.Engine().Heartbeat(cctx, p.opts.WorkerID, p.opts.MemberTTL, leave)
	}
	defer func() {
		if changed {
			return
		}
		// Leave, so the others take this worker's shards at once rather
		// than after MemberTTL.
		if _, err := beat(context.WithoutCancel(ctx), true); err != nil {
			p.log.Debug("timerq: leaving the membership failed; the others wait for it to expire", "err", err)
		}
	}()
	tick := time.NewTicker(p.opts.Heartbeat)
	defer tick.Stop()
	failures := 0
	for {
		members, err := beat(ctx, false)
		switch {
		case err == nil:
			if failures > 0 {
				p.log.Info("timerq: heartbeats succeed again", "failed_attempts", failures)
			}
			failures = 0
			if p.layoutChanged(ctx, shards) {
				return true
			}
			owned := Owned(members, shards, p.opts.WorkerID)
			setOwned(owned)
			if len(owned) == 0 {
				// More workers than shards: this one stands by. Its
				// heartbeat proves Redis answers, which is what readiness
				// (LastClaim) asks of a worker with nothing to claim.
				p.lastClaim.Store(time.Now().UnixNano())
			}
		case ctx.Err() != nil:
		case p.fatal(err, stop, "heartbeat"):
			return false
		default:
			failures++
			if failures == 1 {
				p.log.Warn("timerq: heartbeat failed; keeping the shards claimed so far", "err", err)
			}
			if len(p.OwnedShards()) == 0 {
				setOwned(all)
			}
		}
		select {
		case <-ctx.Done():
			return false
		case <-tick.C:
		}
	}
}

// Owned returns the shards (of shards) that worker owns among members by
// rendezvous (highest random weight) hashing: each shard goes to the member
// with the highest hash of (member, shard). When a member joins or leaves,
// only the shards it wins or held move. A worker missing from members (not
// yet heartbeated) owns nothing.
func Owned(members []string, shards int, worker string) []int {
	var out []int
	for k := range shards {
		best, bestW := "", uint64(0)
		for _, m := range members {
			if w := weight(m, k); best == "" || w > bestW || w == bestW && m > best {
				best, bestW = m, w
			}
		}
		if best == worker {
			out = append(out, k)
		}
	}
	return out
}

// weight mixes a member and a shard into a 64-bit score: FNV-1a of the
// member, xored with the shard, through the SplitMix64 finaliser.
func weight(member string, shard int) uint64 {
	h := fnv.New64a()
	h.Write([]byte(member))
	x := h.Sum64() ^ (uint64(shard)+1)*0x9e3779b97f4a7c15
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// shardLoop claims one shard: as its owner, or, when it watches a shard
// another worker owns, once the shard's timers are overdue (see
// TakeoverOptions).
type shardLoop struct {
	p        *Poller
	shard    int
	cancel   context.CancelFunc
	events   chan shardsub.Event
	owner    atomic.Bool   // this worker owns the shard; else it watches it
	promoted chan struct{} // poked when a watched shard becomes owned
}

// promote makes the loop the shard's owner; a watcher that becomes the
// owner claims at once, since the shard may have waited for its last owner.
func (l *shardLoop) promote() {
	if !l.owner.Swap(true) {
		select {
		case l.promoted <- struct{}{}:
		default:
		}
	}
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

// run is the claim loop of one shard.
//
// Sleep targets are kept in the server's clock, in microseconds: after a
// claim, the loop sleeps until NextDue-Clock after the claim was sent
// (both server times; the claim's clock to the microsecond, so that the
// sleep ends at the due microsecond rather than up to a millisecond after
// it). Counting from the send, not from the reply, the next claim leaves
// about one network hop before the due time and reaches Redis at it; one
// that arrives a little early finds nothing due and costs one empty claim,
// never an early fire, as the script compares with TIME. The loop
// remembers that local monotonic instant, so that a wake message (a server
// due time) can be compared with, and converted to, a local sleep without
// ever trusting the local wall clock. Its timer is a wakeTimer, precise to
// about 0.1 ms where a Go timer is to a millisecond.
//
// A loop that watches a shard it does not own wakes Takeover.After past
// each due time instead, and does not poll while the shard has nothing
// due. Waking, it reads the shard's earliest due time (one ZRANGE, far
// cheaper than a claim): if that is Takeover.After overdue it claims,
// else it sleeps until it is. If such a claim fires timers, the owner is
// not keeping up (it died, or is stuck), so the loop claims at the due
// times themselves until a claim finds nothing to fire.
func (l *shardLoop) run(ctx context.Context, stop context.CancelCauseFunc) {
	c := &claimLoop{shardLoop: l, stop: stop, timer: newWakeTimer()}
	defer c.timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-l.promoted:
			c.onPromoted()
		case ev := <-l.events:
			c.onEvent(ev)
		case <-c.timer.C:
			if !c.onTimer(ctx) {
				return
			}
		}
	}
}

// claimLoop is the state of one run of a shardLoop; only run's goroutine
// touches it.
type claimLoop struct {
	*shardLoop
	stop      context.CancelCauseFunc
	timer     *wakeTimer
	target    int64     // server µs the current sleep ends at
	refServer int64     // server µs of the last claim
	refLocal  time.Time // local instant that claim was sent
	failures  int
	eager     bool // this watcher's last claim fired timers
}

// lag is how long after a due time the loop claims, in µs.
func (c *claimLoop) lag() int64 {
	if c.owner.Load() || c.eager {
		return 0
	}
	return c.p.opts.Takeover.After.Microseconds()
}

// serverNow is the server's clock now, in µs, as of the last claim.
func (c *claimLoop) serverNow() int64 {
	return c.refServer + time.Since(c.refLocal).Microseconds()
}

// claimNow sets the timer to claim at once.
func (c *claimLoop) claimNow() {
	c.target = 0
	c.timer.Reset(0)
}

// onPromoted claims at once a shard the loop has just come to own.
func (c *claimLoop) onPromoted() {
	if c.failures > 0 {
		return // backing off: the next claim comes with the backoff
	}
	c.claimNow()
}

// onEvent handles the shard's wake channel: a (re)subscription, or a due
// time earlier than the one the loop sleeps until.
func (c *claimLoop) onEvent(ev shardsub.Event) {
	if c.failures > 0 {
		return // backing off: the next claim comes with the backoff
	}
	if ev.Subscribed {
		// Confirmed, or resubscribed after a reconnect: wake messages
		// published while unsubscribed are lost, so claim now.
		c.claimNow()
		return
	}
	// A due score: ms, with the microseconds as a fraction.
	due, err := strconv.ParseFloat(ev.Payload, 64)
	if err != nil {
		return
	}
	at := int64(math.Round(due*1000)) + c.lag()
	if at >= c.target {
		return
	}
	c.target = at
	c.timer.Reset(max(time.Duration(at-c.serverNow())*time.Microsecond, 0))
}

// onTimer claims the shard when the timer ends, a watcher only if the
// shard is overdue; it returns false when the loop is to stop.
func (c *claimLoop) onTimer(ctx context.Context) bool {
	c.timer.finish()
	owner := c.owner.Load()
	if !owner && !c.eager && !c.overdue(ctx) {
		return ctx.Err() == nil
	}
	sent := time.Now()
	res, err := c.p.claim(ctx, c.shard)
	switch {
	case err == nil:
		c.claimed(res, sent, owner)
	case c.p.fatal(err, c.stop, "claim"):
		return false
	default:
		c.retry(err, owner)
	}
	return true
}

// overdue reports whether a watcher is to claim its shard now; if not, it
// sets the timer for when the shard will be.
//
// A watcher claims only an overdue shard, whatever woke it: after its
// start, a (re)subscription or a failure too, it reads the head (a
// promotion makes it the owner, a backlog follows an eager claim).
// Claiming there fired the live owner's timers as they came due, and,
// taken for a late owner, made the watcher claim at the due times.
func (c *claimLoop) overdue(ctx context.Context) bool {
	if c.refLocal.IsZero() {
		// No claim has given the loop the server's clock yet.
		sent := time.Now()
		if now, err := c.p.rdb.Time(ctx).Result(); err == nil {
			c.refServer, c.refLocal = now.UnixMicro(), sent
		}
	}
	head, ok, err := c.peek(ctx)
	serverNow := c.serverNow()
	switch {
	case ctx.Err() != nil:
		return false
	case err != nil:
		// Claim instead: its errors are classified and backed off.
		c.p.log.Debug("timerq: reading a watched shard's earliest due time failed; claiming it instead", "shard", c.shard, "err", err)
	case !ok:
		c.target = math.MaxInt64 // empty: a wake message announces the next timer
		return false
	case c.refLocal.IsZero():
		// The server's clock is unknown (TIME failed): claim, whose
		// errors are classified and backed off.
	case head+c.lag() > serverNow:
		c.target = head + c.lag()
		c.timer.Reset(time.Duration(c.target-serverNow) * time.Microsecond)
		return false
	}
	return true
}

// retry reports a failed claim and sets the timer for the next attempt.
func (c *claimLoop) retry(err error, owner bool) {
	p := c.p
	c.failures++
	d := p.backoff(c.failures)
	reason := UnavailableReason(err)
	if reason != "" && p.cluster {
		// A failover: retry soon enough to resume right after the
		// promotion (the client re-reads its slot map on these errors:
		// queue.ReloadOnFailover).
		d = min(d, backoff(p.opts.BackoffMin, max(p.opts.BackoffMin, FailoverBackoffMax), c.failures))
	}
	switch {
	case !owner:
		// The owner reports the shard's errors; a watcher's would repeat
		// them once per worker.
		p.log.Debug("timerq: claim of a watched shard failed; retrying", "shard", c.shard, "attempt", c.failures, "retry_in", d, "err", err)
	case errors.Is(err, queue.ErrSlotMigrating):
		// Only this shard's slot is moving: the others go on.
		if h := p.opts.Hooks.Paused; h != nil {
			h(c.shard, err)
		}
		p.log.Info("timerq: shard paused by a slot migration; retrying", "shard", c.shard, "retry_in", d, "err", err)
	case reason != "":
		c.unavailable(err, reason, d)
	default:
		p.log.Warn("timerq: claim failed; retrying", "shard", c.shard, "attempt", c.failures, "retry_in", d, "err", err)
	}
	c.target = 0
	c.timer.Reset(d)
}

// unavailable reports a claim that failed because the node serving the
// shard is down or the Cluster is failing over.
func (c *claimLoop) unavailable(err error, reason string, d time.Duration) {
	p := c.p
	if h := p.opts.Hooks.Unavailable; h != nil {
		h(c.shard, err)
	}
	what := "cannot connect to the Redis node that serves it (the node is down; on a Cluster, until its replica is promoted)"
	if reason == "cluster_down" {
		what = "Redis Cluster answers CLUSTERDOWN (a master has failed and its replica is not yet promoted)"
	}
	p.log.Warn("timerq: shard paused: "+what+"; retrying", "shard", c.shard, "reason", reason, "attempt", c.failures, "retry_in", d, "err", err)
}

// claimed takes in a claim that succeeded, sent at sent: the server's
// clock, the recurring timers it fired, and whether a watcher took over.
func (c *claimLoop) claimed(res queue.ClaimResult, sent time.Time, owner bool) {
	p := c.p
	if c.failures > 0 {
		if owner {
			p.log.Info("timerq: claims succeed again", "shard", c.shard, "failed_attempts", c.failures)
		}
		c.failures = 0
	}
	// The claim's clock to the microsecond, so that a sleep until the next
	// due time does not add the millisecond's remainder.
	clock := res.Clock
	if clock.IsZero() {
		clock = res.Now
	}
	c.refServer, c.refLocal = clock.UnixMicro(), sent
	p.armFired(res)
	if !owner {
		if len(res.Fired) > 0 && !c.eager {
			// Its owner fell Takeover.After behind: it died, or is stuck.
			// Logged once per episode per watcher.
			p.log.Info("timerq: took over an overdue shard another worker owns; its owner is late, dead or stuck", "shard", c.shard, "fired", len(res.Fired))
		}
		c.eager = len(res.Fired) > 0
	}
	c.sleepAfter(res, clock, owner)
}

// sleepAfter sets the timer for the claim after res, whose server clock
// is clock.
func (c *claimLoop) sleepAfter(res queue.ClaimResult, clock time.Time, owner bool) {
	p := c.p
	if len(res.Fired) >= p.opts.BatchSize {
		c.claimNow() // backlog: claim again at once
		return
	}
	var sleep time.Duration
	switch {
	case owner:
		sleep = p.opts.MaxPollInterval
		if !res.NextDue.IsZero() {
			sleep = min(sleep, max(res.NextDue.Sub(clock), 0))
		}
	case res.NextDue.IsZero():
		// Watching an empty shard: a wake message announces the next
		// timer, so nothing to poll.
		c.target = math.MaxInt64
		c.timer.Stop()
		return
	default:
		sleep = max(res.NextDue.Sub(clock), 0) + time.Duration(c.lag())*time.Microsecond
	}
	if len(res.Fired) > 0 {
		// Timers coming due faster than one per MinClaimInterval share a
		// claim, which bounds the claims' cost to Redis.
		sleep = max(sleep, p.opts.MinClaimInterval)
	}
	c.target = c.refServer + sleep.Microseconds()
	c.timer.Reset(sleep - time.Since(c.refLocal))
}

// peek reads the shard's earliest due time, in server µs (due scores are
// ms with the µs as a fraction); ok is false if nothing is pending.
func (l *shardLoop) peek(ctx context.Context) (head int64, ok bool, err error) {
	cctx, cancel := context.WithTimeout(ctx, l.p.opts.ClaimTimeout)
	defer cancel()
	if n, err := l.p.q.Inspect().Shards(ctx); err != nil || l.shard >= n {
		// The layout changed under the loop, which serve is replacing.
		return 0, false, err
	}
	// Due times only: on a shard of layout 2 the settled timers sort after
	// them, in the same set (docs/redis-layout.md, "Layout versions").
	zs, err := l.p.rdb.ZRangeByScoreWithScores(cctx, l.p.q.Keys().Shard(l.shard)[0],
		&redis.ZRangeBy{Min: "-inf", Max: queue.PendingEnd, Count: 1}).Result()
	if err != nil || len(zs) == 0 {
		return 0, false, err
	}
	return int64(math.Round(zs[0].Score * 1000)), true, nil
}

// claim runs one claim. Its context is not cancelled with Run's, so that a
// claim in flight when Run is stopped completes (its timers have fired
// whether or not the reply arrives), but ClaimTimeout bounds it.
func (p *Poller) claim(ctx context.Context, shard int) (queue.ClaimResult, error) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.opts.ClaimTimeout)
	defer cancel()
	res, err := p.q.Engine().ClaimShard(cctx, shard, p.opts.BatchSize)
	if err != nil {
		if h := p.opts.Hooks.ClaimFailed; h != nil {
			h(err)
		}
		return res, err
	}
	p.lastClaim.Store(time.Now().UnixNano())
	// Each quarantined record is in the reply of the one claim that moved
	// it, so this logs it once.
	for _, n := range res.Quarantined {
		p.log.Error("timerq: quarantined a record timerq cannot fire; the other timers fire as usual",
			"id", n.ID, "shard", n.Shard, "reason", n.Reason,
			"fix", "inspect it with timerctl quarantine list, then fix what wrote it and drop it with timerctl quarantine drop")
	}
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
