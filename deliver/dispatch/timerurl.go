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

// errTimerURLsOff is why a fire with a timer URL is dead-lettered while
// its namespace's delivery policy does not allow timer URLs.
var errTimerURLsOff = errors.New("timer URLs are not allowed by the namespace's delivery policy; allow them (queue's Deliveries().SetPolicy, or PUT /v1/namespaces/{ns}/delivery-policy), then requeue the dead letter (Deliveries().Requeue)")

// policyCache keeps a namespace's delivery policy for a second, so that a
// fire with a timer URL costs no Redis read of it, and a change reaches
// the dispatcher within a second.
type policyCache struct {
	mu     sync.Mutex
	at     time.Time
	policy queue.DeliveryPolicy
}

func (c *policyCache) get(ctx context.Context, q *queue.Queue) (queue.DeliveryPolicy, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.at.IsZero() && time.Since(c.at) < time.Second {
		return c.policy, nil
	}
	p, err := q.Deliveries().Policy(ctx)
	if err != nil {
		return p, err
	}
	c.policy, c.at = p, time.Now()
	return p, nil
}

// withTimerURL returns ep with the fire's own URL when the namespace's
// delivery policy allows timer URLs: errTimerURLsOff (dead-letter it)
// when it does not, another error (try again later) when the policy could
// not be read. The URL was checked when the timer was scheduled
// (queue.ValidateTimerURL); the Sender's guard judges every address it
// dials, and refuses (dead-letters) what it does not allow.
func (d *Dispatcher) withTimerURL(ctx context.Context, ep deliver.Endpoint, url string) (deliver.Endpoint, error) {
	p, err := d.policy.get(ctx, d.Queue)
	if err != nil {
		return ep, fmt.Errorf("reading the delivery policy: %w", err)
	}
	if !p.AllowTimerURLs {
		return ep, errTimerURLsOff
	}
	ep.URL = url
	return ep, nil
}
