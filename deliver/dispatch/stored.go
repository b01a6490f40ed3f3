package dispatch

import (
	"context"
	"errors"
	"fmt"

	"github.com/timerq/timerq/deliver"
	"github.com/timerq/timerq/queue"
)

// RouteByEndpoint is the Route of fires whose timers name an endpoint
// (queue.NewTimer.Endpoint, queue.Recurring.Endpoint): the name the claim
// put in the fire event.
func RouteByEndpoint(ev queue.Event) string { return ev.Endpoint }

// StoredEndpoints returns a Lookup that reads each endpoint from the
// namespace's endpoints (queue.Endpoints.Put) at every fire, so that a
// change, a disable or a new secret applies to the next attempt. An
// endpoint that no longer exists wraps ErrNoEndpoint, so its fires are
// dead-lettered; one that the guard g refuses (a private address the
// dispatcher is not allowed to reach) is returned with its error, which
// wraps deliver.ErrRefused, so its fires are dead-lettered too.
func StoredEndpoints(q *queue.Queue, g *deliver.Guard) func(ctx context.Context, name string) (deliver.Endpoint, error) {
	return func(ctx context.Context, name string) (deliver.Endpoint, error) {
		e, err := q.Endpoints().Get(ctx, name)
		if errors.Is(err, queue.ErrEndpointNotFound) {
			return deliver.Endpoint{}, fmt.Errorf("%w: %w", ErrNoEndpoint, err)
		}
		if err != nil {
			return deliver.Endpoint{}, err
		}
		return e.Deliver(g)
	}
}
