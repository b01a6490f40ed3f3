package dispatch

import (
	"context"
	"errors"

	"github.com/timerq/timerq/queue"
)

// Redriven is a dead-lettered delivery that Redrive requeued (or, with
// dry run, would requeue).
type Redriven struct {
	queue.DeadLetter
	// NewStreamID is the new fire stream entry, "" on a dry run.
	NewStreamID string
}

// Redrive requeues the deliveries group ("" means DefaultGroup)
// dead-lettered to endpoint ("" for every endpoint): each goes back onto
// its shard's fire stream (queue.Deliveries.Requeue), for that group only, and is
// delivered again as a new fire of its own, with a fresh set of attempts
// under its endpoint's policy and the same webhook-id, so receivers
// deduplicate it. dryRun lists them without requeueing. It pages through
// the dead letters (queue.Deliveries.DeadLetters), so it costs a round trip per
// MaxBatch of them and one per requeue; dead letters of other groups,
// and fires that deliver to no endpoint, are left. A dead letter that
// another redrive requeued first is skipped.
func Redrive(ctx context.Context, q *queue.Queue, group, endpoint string, dryRun bool) ([]Redriven, error) {
	if group == "" {
		group = DefaultGroup
	}
	if err := queue.ValidateConsumerName("group", group); err != nil {
		return nil, err
	}
	if endpoint != "" {
		if err := queue.ValidateEndpointName(endpoint); err != nil {
			return nil, err
		}
	}
	var out []Redriven
	cursor := ""
	for {
		page, err := q.Deliveries().DeadLetters(ctx, queue.DeadLetterListOptions{Limit: queue.MaxBatch, Cursor: cursor})
		if err != nil {
			return out, err
		}
		for _, d := range page.DeadLetters {
			if d.Group != group || d.Event.Endpoint == "" || endpoint != "" && d.Event.Endpoint != endpoint {
				continue
			}
			r := Redriven{DeadLetter: d}
			if !dryRun {
				id, err := q.Deliveries().Requeue(ctx, d.Event.Shard, d.Event.StreamID)
				if errors.Is(err, queue.ErrDeadLetterNotFound) {
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
