package poller

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/timerq/timerq/queue"
)

// watchReplicas checks at start, and every Options.ReplicasCheck, that
// each Redis master serving the namespace's shards has more replicas in
// sync than the namespace's replicas setting (queue.TooFewReplicas), until
// ctx ends. The worker must keep serving, so it does not refuse as
// SetReplicas does: it logs a warning when the masters' state changes (a
// failover, a replica lost or added, a slot moved), not on every check,
// and reports each check to Hooks.Replicas for the metrics and alerts.
func (p *Poller) watchReplicas(ctx context.Context) {
	last := "" // what the last check logged: "" at start and when all is well
	tick := time.NewTicker(p.opts.ReplicasCheck)
	defer tick.Stop()
	for {
		last = p.checkReplicas(ctx, last)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// checkReplicas is one check of watchReplicas; last is the state the
// previous check logged, and it returns this one's.
func (p *Poller) checkReplicas(ctx context.Context, last string) string {
	ctx, cancel := context.WithTimeout(ctx, p.opts.ClaimTimeout)
	defer cancel()
	in := p.q.Inspect()
	n, err := in.Replicas(ctx)
	if err != nil {
		return last // the claim loops report a Redis that does not answer
	}
	if n == 0 {
		if h := p.opts.Hooks.Replicas; h != nil {
			h(0, nil)
		}
		return ""
	}
	ms, err := in.MasterReplicas(ctx)
	if err != nil {
		if ctx.Err() != nil || errors.Is(err, queue.ErrUnreachable) || errors.Is(err, queue.ErrClusterDown) {
			return last // a master down or a failover under way: check again later
		}
		state := "unchecked: " + err.Error()
		if state != last {
			p.log.Warn("timerq: cannot read the masters' replicas to check them against the namespace's replicas setting", "replicas", n, "err", err)
		}
		return state
	}
	if h := p.opts.Hooks.Replicas; h != nil {
		h(n, ms)
	}
	err = queue.TooFewReplicas(p.q.Namespace(), ms, n)
	if err == nil {
		if last != "" {
			p.log.Info("timerq: every master serving the namespace has its replicas again", "replicas", n, "masters", len(ms))
		}
		return ""
	}
	if state := err.Error(); state != last {
		// Warn: refusing would stop the worker, and its shards with it.
		var few *queue.TooFewReplicasError
		errors.As(err, &few)
		shards := 0
		for _, m := range ms {
			shards += len(m.Shards)
		}
		p.log.Warn("timerq: a master has too few replicas for the namespace's replicas setting: its shards stop firing when replicas are lost or it fails over",
			"replicas", n, "problem", few.Problem(),
			"fix", fmt.Sprintf("add replicas until every master has %d, or lower the setting: timerctl namespace create %s --shards %d --replicas %d",
				n+1, p.q.Namespace(), shards, few.MaxSetting()))
		return state
	}
	return last
}
