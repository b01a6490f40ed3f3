package dispatch

import (
	"context"

	"github.com/timerq/timerq/queue"
)

// Redriven is a dead-lettered delivery that Redrive requeued (or, with
// dry run, would requeue).
type Redriven = queue.Redriven

// Redrive requeues the deliveries group ("" means DefaultGroup)
// dead-lettered to endpoint ("" for every endpoint), or with dryRun lists
// them: q.Deliveries().Redrive, which owns the logic, since the dead
// letters live there and the dashboard redrives without a dispatcher.
func Redrive(ctx context.Context, q *queue.Queue, group, endpoint string, dryRun bool) ([]Redriven, error) {
	return q.Deliveries().Redrive(ctx, group, &queue.RedriveOptions{Endpoint: endpoint, DryRun: dryRun})
}
