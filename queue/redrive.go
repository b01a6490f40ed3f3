package queue

import (
	"context"
	"errors"
)

// DefaultDeliveryGroup is the consumer group of the dispatchers that
// deliver fires to endpoints (timerworker --deliver) when they name none:
// dispatch.DefaultGroup, and the group whose dead letters Redrive takes
// by default.
const DefaultDeliveryGroup = "timerq-deliver"

// RedriveOptions narrows a Redrive. The zero value, or nil, redrives the
// group's dead-lettered deliveries to every endpoint.
type RedriveOptions struct {
	// Endpoint keeps the dead letters delivered to this endpoint; ""
	// keeps those of every endpoint.
	Endpoint string
	// DryRun lists the dead letters Redrive would requeue, and requeues
	// none.
	DryRun bool
}

// Redriven is a dead-lettered delivery that Redrive requeued (or, on a
// dry run, would requeue).
type Redriven struct {
	DeadLetter
	// NewStreamID is the new fire stream entry, "" on a dry run.
	NewStreamID string
}

// Redrive requeues the deliveries that group ("" means
// DefaultDeliveryGroup) dead-lettered to an endpoint (opts.Endpoint, or
// any): each goes back onto its shard's fire stream (Requeue), for that
// group only, and is delivered again as a new fire of its own, with a
// fresh set of attempts under its endpoint's policy and the same
// webhook-id, so receivers deduplicate it.
//
// It pages through the dead letters (DeadLetters), so it costs a round
// trip per MaxBatch of them and one per requeue; dead letters of other
// groups, and fires that deliver to no endpoint, are left. A dead letter
// that another redrive requeued first is skipped. On an error it returns
// what it requeued before it.
func (d Deliveries) Redrive(ctx context.Context, group string, opts *RedriveOptions) ([]Redriven, error) {
	var o RedriveOptions
	if opts != nil {
		o = *opts
	}
	if group == "" {
		group = DefaultDeliveryGroup
	}
	if err := ValidateConsumerName("group", group); err != nil {
		return nil, err
	}
	if o.Endpoint != "" {
		if err := ValidateEndpointName(o.Endpoint); err != nil {
			return nil, err
		}
	}
	var out []Redriven
	cursor := ""
	for {
		page, err := d.DeadLetters(ctx, DeadLetterListOptions{Limit: MaxBatch, Cursor: cursor})
		if err != nil {
			return out, err
		}
		for _, dl := range page.DeadLetters {
			if dl.Group != group || dl.Event.Endpoint == "" || o.Endpoint != "" && dl.Event.Endpoint != o.Endpoint {
				continue
			}
			r := Redriven{DeadLetter: dl}
			if !o.DryRun {
				id, err := d.Requeue(ctx, dl.Event.Shard, dl.Event.StreamID)
				if errors.Is(err, ErrDeadLetterNotFound) {
					continue
				}
				if err != nil {
					return out, err
				}
				r.NewStreamID = id
			}
			out = append(out, r)
		}
		if page.NextCursor == "" {
			return out, nil
		}
		cursor = page.NextCursor
	}
}
