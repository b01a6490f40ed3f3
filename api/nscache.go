package api

import (
	"context"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/timerq/timerq/queue"
)

// uncreatedTTL is how long a namespace that was never created
// (PUT /v1/namespaces/{ns}) stays open. A queue reads the shard count once
// and keeps it; were an uncreated namespace's queue kept for good, creating
// the namespace with 16 shards through another replica would leave this
// one writing timers to the one-shard layout, where no worker looks. A
// created namespace's count never changes, so its queue is kept.
const uncreatedTTL = time.Second

// doneCtx is an ended context: queue.Inspector.Created under it answers from the
// queue's cached layout and never reaches Redis.
var doneCtx = func() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}()

// nsCache keeps a bounded set of open namespaces.
type nsCache struct {
	rdb  redis.UniversalClient
	tmpl queue.Options
	max  int

	mu     sync.Mutex
	m      map[string]*nsEntry
	clock  uint64
	closed bool
}

type nsEntry struct {
	q       *queue.Queue
	refs    int
	used    uint64
	opened  time.Time
	created bool // the namespace is known to have been created
	retired bool // out of the map: closed when refs reach 0
}

func newNSCache(rdb redis.UniversalClient, tmpl queue.Options, max int) *nsCache {
	return &nsCache{rdb: rdb, tmpl: tmpl, max: max, m: map[string]*nsEntry{}}
}

// open returns the queue of namespace ns and the func that releases it.
func (c *nsCache) open(ns string) (*queue.Queue, func(), error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, nil, errClosed
	}
	c.clock++
	e := c.m[ns]
	if e != nil && !e.created && time.Since(e.opened) > uncreatedTTL {
		c.retire(ns, e)
		e = nil
	}
	if e == nil {
		o := c.tmpl
		o.Namespace = ns
		q, err := queue.New(c.rdb, o)
		if err != nil {
			return nil, nil, err
		}
		e = &nsEntry{q: q, opened: time.Now()}
		c.m[ns] = e
	}
	// Taken before evict, which must not pick the namespace being opened.
	e.refs++
	e.used = c.clock
	c.evict()
	var once sync.Once
	return e.q, func() { once.Do(func() { c.release(e) }) }, nil
}

func (c *nsCache) release(e *nsEntry) {
	created := false
	if !e.created {
		created, _ = e.q.Inspect().Created(doneCtx)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if created {
		e.created = true
	}
	e.refs--
	if e.retired && e.refs == 0 {
		_ = e.q.Close()
	}
}

// retire takes e out of the map, closing it now if no request uses it.
// c.mu is held.
func (c *nsCache) retire(ns string, e *nsEntry) {
	delete(c.m, ns)
	e.retired = true
	if e.refs == 0 {
		_ = e.q.Close()
	}
}

// evict retires the least recently used idle namespaces while more than
// max are open. Namespaces in use are never evicted, so a burst of
// requests to many namespaces can exceed max until they end. c.mu is held.
func (c *nsCache) evict() {
	for len(c.m) > c.max {
		var victim string
		var ve *nsEntry
		for ns, e := range c.m {
			if e.refs == 0 && (ve == nil || e.used < ve.used) {
				victim, ve = ns, e
			}
		}
		if ve == nil {
			return
		}
		c.retire(victim, ve)
	}
}

// forget retires namespace ns, so that the next request opens it afresh:
// after PUT /v1/namespaces/{ns} its shard count may differ from the one
// an open queue read.
func (c *nsCache) forget(ns string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.m[ns]; e != nil {
		c.retire(ns, e)
	}
}

func (c *nsCache) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	for ns, e := range c.m {
		c.retire(ns, e)
	}
}
