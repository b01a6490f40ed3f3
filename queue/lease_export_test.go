package queue

import (
	"context"
	"time"
)

// LeaseReply runs leaseReply on reply, as shard 0's, and returns the
// deliveries it handed out, its last and whether it settled some entry.
func LeaseReply(ctx context.Context, q *Queue, group string, reply any) (int, string, bool, error) {
	l, err := q.layout(ctx)
	if err != nil {
		return 0, "", false, err
	}
	ds, last, settled, err := q.leaseReply(ctx, l, group, 0, reply, LeaseOptions{Lease: time.Minute, MaxAttempts: 3}, time.Now())
	return len(ds), last, settled, err
}
