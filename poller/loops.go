package poller

import (
	"context"
	"maps"
	"slices"
	"sync"

	"github.com/timerq/timerq/internal/shardsub"
)

// shardLoops is a poller's set of claim loops over one layout of the
// namespace: a loop per claimed shard (with takeover, per shard, the ones
// not owned watching), the wake subscription that feeds them, and the
// goroutine that routes its events to them. newShardLoops starts it,
// setOwned adjusts it, close ends it: nothing it starts outlives close.
type shardLoops struct {
	p      *Poller
	ctx    context.Context // the loops' parent: Run's
	stop   context.CancelCauseFunc
	shards int // the layout's shard count
	// watch keeps a loop on every shard: one not owned watches it (see
	// TakeoverOptions) instead of stopping, and is promoted back in place.
	watch bool

	sub        *shardsub.Sub
	byChannel  map[string]int // wake channel → shard
	dispatched chan struct{}  // closed when dispatch returns

	mu    sync.Mutex // guards loops
	loops map[int]*shardLoop
	wg    sync.WaitGroup // the loops' goroutines
}

// newShardLoops subscribes to nothing yet and runs no loop: setOwned
// starts them. It starts the goroutine that routes wake events.
func newShardLoops(ctx context.Context, p *Poller, stop context.CancelCauseFunc, shards int, sharded, watch bool) *shardLoops {
	s := &shardLoops{
		p:          p,
		ctx:        ctx,
		stop:       stop,
		shards:     shards,
		watch:      watch,
		sub:        shardsub.New(p.rdb, sharded, 1024),
		byChannel:  map[string]int{},
		dispatched: make(chan struct{}),
		loops:      map[int]*shardLoop{},
	}
	for k := range shards {
		s.byChannel[p.q.Keys().Wake(k)] = k
	}
	go s.dispatch()
	return s
}

// dispatch routes wake messages and (re)subscriptions to their shard's
// loop until the subscription is closed.
func (s *shardLoops) dispatch() {
	defer close(s.dispatched)
	for ev := range s.sub.Events() {
		s.route(ev)
	}
}

// route hands ev to its shard's loop, if it has one and it has room.
func (s *shardLoops) route(ev shardsub.Event) {
	k, ok := s.byChannel[ev.Channel]
	if !ok {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if l := s.loops[k]; l != nil {
		select {
		case l.events <- ev:
		default: // full: the loop's next poll (MaxPollInterval) covers it
		}
	}
}

// setOwned makes want the shards this poller owns: their loops are
// promoted or started; the others' are demoted to watching (with watch)
// or stopped and unsubscribed. Unsubscriptions go before subscriptions.
// The Owned hook and the "claiming shards" line come only when the owned
// set changes.
func (s *shardLoops) setOwned(want []int) {
	p := s.p
	s.mu.Lock()
	defer s.mu.Unlock()
	keep := map[int]bool{}
	for _, k := range want {
		keep[k] = true
	}
	var drop, add []string
	for k, l := range s.loops {
		switch {
		case keep[k]:
			l.promote()
		case s.watch:
			l.owner.Store(false)
		default:
			l.cancel()
			delete(s.loops, k)
			drop = append(drop, p.q.Keys().Wake(k))
		}
	}
	start := want
	if s.watch {
		start = make([]int, s.shards)
		for k := range start {
			start[k] = k
		}
	}
	for _, k := range start {
		if s.loops[k] != nil {
			continue
		}
		lctx, cancel := context.WithCancel(s.ctx)
		l := &shardLoop{p: p, shard: k, cancel: cancel, events: make(chan shardsub.Event, 64), promoted: make(chan struct{}, 1)}
		l.owner.Store(keep[k])
		s.loops[k] = l
		add = append(add, p.q.Keys().Wake(k))
		s.wg.Go(func() { l.run(lctx, s.stop) })
	}
	if len(drop) > 0 {
		s.sub.Unsubscribe(s.ctx, drop...)
	}
	if len(add) > 0 {
		// Subscribed before the loop's second claim at the latest: the
		// confirmation triggers a claim, so no wake is missed.
		if err := s.sub.Subscribe(s.ctx, add...); err != nil {
			p.log.Debug("timerq: wake subscription failed; polling covers it", "err", err)
		}
	}
	owned := slices.Sorted(maps.Keys(keep))
	p.ownedMu.Lock()
	changed := !slices.Equal(owned, p.owned)
	p.owned = owned
	p.ownedMu.Unlock()
	if changed {
		p.log.Info("timerq: claiming shards", "shards", owned, "of", s.shards)
		if h := p.opts.Hooks.Owned; h != nil {
			h(owned)
		}
	}
}

// close stops the loops and waits for them (their claims in flight
// complete), then closes the subscription, waits for dispatch, and leaves
// the poller owning no shard.
func (s *shardLoops) close() {
	s.mu.Lock()
	for _, l := range s.loops {
		l.cancel()
	}
	s.mu.Unlock()
	s.wg.Wait()
	_ = s.sub.Close()
	<-s.dispatched
	s.p.ownedMu.Lock()
	s.p.owned = nil
	s.p.ownedMu.Unlock()
}
