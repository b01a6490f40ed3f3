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

// FromQueue maps an endpoint as queue stores it onto what the delivery
// engine needs: each secret through deliver.ParseSecret, the retry policy
// field for field. An error (a secret that is not one, written by
// something other than timerq) wraps deliver.ErrInvalidSecret.
func FromQueue(e queue.Endpoint) (deliver.Endpoint, error) {
	out := deliver.Endpoint{Name: e.Name, URL: e.URL, Headers: e.Headers, Timeout: e.Timeout,
		Policy: deliver.Policy{MaxAttempts: e.Retry.MaxAttempts, MaxAge: e.Retry.MaxAge, Base: e.Retry.Base,
			Cap: e.Retry.Cap, RetryClientErrors: e.Retry.RetryClientErrors},
		MaxInFlight: e.MaxInFlight, Disabled: e.Disabled}
	for i, s := range e.Secrets {
		sec, err := deliver.ParseSecret(s.Reveal())
		if err != nil {
			return deliver.Endpoint{}, fmt.Errorf("endpoint %q secret %d: %w; put the endpoint again with valid secrets", e.Name, i+1, err)
		}
		out.Secrets = append(out.Secrets, sec)
	}
	return out, nil
}

// Endpoints is a Dispatcher's Lookup over a queue's endpoints
// (queue.GetEndpoint), each kept for TTL once read, a missing one too: at
// most one Redis round trip per endpoint name per TTL, none per fire.
// Safe for concurrent use.
type Endpoints struct {
	// Queue is the namespace whose endpoints are read.
	Queue *queue.Queue
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
	qe, err := c.Queue.GetEndpoint(ctx, name)
	switch {
	case errors.Is(err, queue.ErrEndpointNotFound):
		err = fmt.Errorf("%w: %w", ErrNoEndpoint, err)
	case err != nil:
		return deliver.Endpoint{}, err
	}
	var ep deliver.Endpoint
	if err == nil {
		ep, err = FromQueue(qe)
	}
	c.mu.Lock()
	if c.cache == nil {
		c.cache = map[string]cachedEndpoint{}
	}
	c.cache[name] = cachedEndpoint{ep: ep, err: err, at: t}
	c.mu.Unlock()
	return ep, err
}
