package queue

import (
	"context"
	"errors"
)

// consumeLeased is Consume for a namespace with flow policies: it takes
// one event at a time with Lease, so that each flow's rate and in-flight
// bound hold for Consume's deliveries as for every Lease (flow.go), and
// settles it as Consume does: acknowledged when handler returns nil,
// released for a retry after RetryDelay·2^(attempt-1) (at most ClaimIdle/2)
// otherwise, dead-lettered after MaxAttempts. An event in hand when ctx
// ends is released at once, for another consumer.
func (q *Queue) consumeLeased(ctx context.Context, group, consumer string, handler func(context.Context, Event) error, opts ConsumeOptions) {
	lo := LeaseOptions{Lease: opts.ClaimIdle, MaxAttempts: opts.MaxAttempts, Count: 1, Block: opts.Block}
	onErr := func(err error) {
		if opts.OnError != nil {
			opts.OnError(errorf("consume %s/%s: %w", group, consumer, err))
		}
	}
	failures := 0
	for ctx.Err() == nil {
		ds, err := q.Lease(ctx, group, consumer, lo)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			onErr(err)
			failures++
			if !sleepCtx(ctx, consumeBackoff(failures)) {
				return
			}
			continue
		}
		failures = 0
		for _, d := range ds {
			q.handleLeased(ctx, group, d, handler, lo, opts, onErr)
		}
	}
}

func (q *Queue) handleLeased(ctx context.Context, group string, d Delivery, handler func(context.Context, Event) error,
	lo LeaseOptions, opts ConsumeOptions, onErr func(error)) {
	settle := context.WithoutCancel(ctx)
	err := handler(ctx, d.Event)
	switch {
	case err == nil:
		if _, err := q.Ack(settle, group, d.DeliveryID); err != nil {
			onErr(err)
		}
		return
	case ctx.Err() != nil:
		_, err = q.Release(settle, group, d.DeliveryID, ReleaseOptions{Error: "consumer stopped"}, lo)
	default:
		delay := min(opts.RetryDelay<<min(d.Event.Attempt-1, 20), opts.ClaimIdle/2)
		_, err = q.Release(settle, group, d.DeliveryID, ReleaseOptions{Delay: delay, Error: err.Error()}, lo)
	}
	if err != nil && !errors.Is(err, ErrLeaseLost) && !errors.Is(err, ErrDeliveryNotFound) {
		onErr(err)
	}
}

// hasFlowPolicies reports whether the namespace has a flow policy; false
// when they cannot be read.
func (q *Queue) hasFlowPolicies(ctx context.Context) bool {
	m, _, err := q.flowPolicies(ctx)
	return err == nil && len(m) > 0
}
