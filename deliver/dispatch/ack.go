package dispatch

import (
	"context"
	"errors"

	"github.com/timerq/timerq/internal/batch"
	"github.com/timerq/timerq/queue"
)

// maxAckBatch bounds the deliveries one acknowledgement round trip
// settles.
const maxAckBatch = 256

// delivered is a fire its endpoint took, waiting for its acknowledgement
// and attempt log entry (queue.Deliveries.AckAttempts).
type delivered struct {
	id     string
	log    queue.DeliveryAttempt
	report Report
}

// ackLoop acknowledges delivered fires until d.acks is closed and
// drained: each round trip takes every fire delivered while the one
// before was under way (group commit), so a busy dispatcher makes one
// round trip per batch instead of one per fire, and an idle one adds no
// wait. The context is never cancelled by the dispatcher's stop: a fire
// delivered is acknowledged.
func (d *Dispatcher) ackLoop(ctx context.Context) {
	defer close(d.ackDone)
	batch.Drain(d.acks, maxAckBatch, func(b []delivered) { d.flushAcks(ctx, b) })
}

// flushAcks acknowledges batch in one round trip and reports each
// attempt.
func (d *Dispatcher) flushAcks(ctx context.Context, batch []delivered) {
	acks := make([]queue.AttemptAck, len(batch))
	for i, x := range batch {
		acks[i] = queue.AttemptAck{DeliveryID: x.id, Attempt: x.log}
	}
	_, errs := d.Queue.Deliveries().AckAttempts(ctx, d.Group, acks)
	for i, x := range batch {
		err := errs[i]
		if err != nil {
			d.onError(err)
			if errors.Is(err, queue.ErrAttemptLog) {
				err = nil // settled; onError has it
			}
		}
		if d.OnAttempt != nil {
			x.report.SettleErr = err
			d.OnAttempt(x.report)
		}
	}
}
