package dispatch

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/timerq/timerq/deliver"
	"github.com/timerq/timerq/queue"
)

// DefaultEndpointTTL is Endpoints.TTL when it is 0: how long a dispatcher
// keeps using an endpoint it read, so that a change (a new URL, a
// disabled endpoint, a rotated secret) reaches every dispatcher within
// about a second without a Redis round trip per fire.
const DefaultEndpointTTL = time.Second

// Endpoints is a Dispatcher's Lookup over a queue's endpoints
// (queue.Endpoints.Get, mapped by queue.Endpoint.Deliver), each kept for TTL
// once read, a missing one too: at most one Redis round trip per endpoint
// name per TTL, none per fire (StoredEndpoints reads at every fire). Safe
// for concurrent use.
type Endpoints struct {
	// Queue is the namespace whose endpoints are read.
	Queue *queue.Queue
	// Guard checks each endpoint read (deliver.Endpoint.Validate); nil
	// refuses every private address. Give the Sender's.
	Guard *deliver.Guard
	// TTL is how long a read endpoint is used; 0 means
	// DefaultEndpointTTL.
	TTL time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time

	mu    sync.Mutex
	cache map[string]cachedEndpoint
}

type cachedEndpoint struct {
	ep  deliver.Endpoint
	err error
	at  time.Time
}

// Lookup returns the endpoint name, from the cache while it is fresh. A
// missing endpoint gives an error wrapping ErrNoEndpoint (and
// queue.ErrEndpointNotFound); a failed read is not cached.
func (c *Endpoints) Lookup(ctx context.Context, name string) (deliver.Endpoint, error) {
	now := time.Now
	if c.Now != nil {
		now = c.Now
	}
	ttl := c.TTL
	if ttl <= 0 {
		ttl = DefaultEndpointTTL
	}
	t := now()
	c.mu.Lock()
	e, ok := c.cache[name]
	c.mu.Unlock()
	if ok && t.Sub(e.at) < ttl {
		return e.ep, e.err
	}
	qe, err := c.Queue.Endpoints().Get(ctx, name)
	switch {
	case errors.Is(err, queue.ErrEndpointNotFound):
		err = fmt.Errorf("%w: %w", ErrNoEndpoint, err)
	case err != nil:
		return deliver.Endpoint{}, err
	}
	var ep deliver.Endpoint
	if err == nil {
		ep, err = qe.Deliver(c.Guard)
	}
	c.mu.Lock()
	if c.cache == nil {
		c.cache = map[string]cachedEndpoint{}
	}
	c.cache[name] = cachedEndpoint{ep: ep, err: err, at: t}
	c.mu.Unlock()
	return ep, err
}
