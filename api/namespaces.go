package api

import (
	"context"
	"net/http"

	"github.com/timerq/timerq/internal/timefmt"
	"github.com/timerq/timerq/queue"
)

type namespaceCreateJSON struct {
	Shards *int `json:"shards"`
}

// NamespaceJSON is a namespace as the API returns it.
type NamespaceJSON struct {
	Namespace string `json:"namespace"`
	Shards    int    `json:"shards"`
	// Created says, in an answer to PUT, whether the request created the
	// namespace; in an answer to GET, whether it was ever created.
	Created bool `json:"created"`
	// Replicas is set only by `timerctl namespace create|show`: the
	// namespace's replicas setting (queue.SetReplicas).
	Replicas *int       `json:"replicas,omitempty"`
	Stats    *StatsJSON `json:"stats,omitempty"`
	// Quotas is the usage against each quota, in an answer to GET.
	Quotas *QuotasUsageJSON `json:"quotas,omitempty"`
}

// StatsJSON is a snapshot of a namespace or of one of its shards.
type StatsJSON struct {
	Now                string      `json:"now"`
	Scheduled          int64       `json:"scheduled"`
	Fired              int64       `json:"fired"`
	Cancelled          int64       `json:"cancelled"`
	Overdue            int64       `json:"overdue"`
	EarliestDue        *string     `json:"earliest_due"`
	OldestOverdueAgeMs int64       `json:"oldest_overdue_age_ms"`
	Shards             []StatsJSON `json:"shards,omitempty"`

	// DueWithin is the namespace's due horizon, at the top level only.
	DueWithin []DueWithinJSON `json:"due_within,omitempty"`
}

// DueWithinJSON is one bound of a namespace's due horizon
// (queue.Inspector.DueHorizon): the scheduled timers due at or before the
// Redis server's now + Within, cumulative, so "overdue" (now) is in every
// count. Within is queue.HorizonName's: overdue, 1m, 1h, 1d, 1w.
type DueWithinJSON struct {
	Within string `json:"within"`
	Count  int64  `json:"count"`
}

// ToDueWithinJSON is h as the API and `timerctl stats -o json` show it,
// one entry per bound in h's order.
func ToDueWithinJSON(h queue.DueHorizon) []DueWithinJSON {
	out := make([]DueWithinJSON, len(h.Within))
	for i, w := range h.Within {
		out[i] = DueWithinJSON{Within: queue.HorizonName(w), Count: h.Due[i]}
	}
	return out
}

// ToStatsJSON is s as the API and `timerctl stats -o json` show it.
func ToStatsJSON(s queue.Stats) StatsJSON {
	j := StatsJSON{Now: timefmt.Format(s.Now), Scheduled: s.Scheduled, Fired: s.Fired, Cancelled: s.Cancelled,
		Overdue: s.Overdue, EarliestDue: optTime(s.EarliestDue), OldestOverdueAgeMs: s.OldestOverdueAge.Milliseconds()}
	for _, sh := range s.Shards {
		if sh.Now.IsZero() {
			sh.Now = s.Now
		}
		j.Shards = append(j.Shards, ToStatsJSON(sh))
	}
	return j
}

// namespaceRequest is the optional body of PUT /v1/namespaces/{ns}.
type namespaceRequest struct{ shards int }

func (req *namespaceRequest) read(h *Handler, w http.ResponseWriter, r *http.Request) error {
	var j namespaceCreateJSON
	if err := h.decode(w, r, &j, true); err != nil {
		return err
	}
	req.shards = 1
	setGiven(&req.shards, j.Shards)
	if req.shards < 1 || req.shards > queue.MaxShards {
		return invalid(SlugInvalidArgument, "/shards", "shards %d is outside 1..%d", req.shards, queue.MaxShards)
	}
	return nil
}

// createNamespace creates the namespace with a fixed shard count
// (queue.CreateNamespace): 201 when created, 200 when it existed alike,
// 409 when it exists with another count.
func (h *Handler) createNamespace(ctx context.Context, q *queue.Queue, req *namespaceRequest) (any, error) {
	ns := q.Namespace()
	created, err := queue.CreateNamespace(ctx, h.opts.Client, ns, req.shards)
	if err != nil {
		return nil, err
	}
	// A queue opened before, q among them, may have read the namespace as
	// uncreated, with one shard.
	h.ns.forget(ns)
	return createdReply(created, NamespaceJSON{Namespace: ns, Shards: req.shards, Created: created}), nil
}

// getNamespace answers the namespace's shard count and stats, with its
// due horizon.
func getNamespace(ctx context.Context, q *queue.Queue, _ *none) (any, error) {
	st, err := q.Stats(ctx)
	if err != nil {
		return nil, err
	}
	due, err := q.Inspect().DueHorizon(ctx, queue.DueHorizonBounds)
	if err != nil {
		return nil, err
	}
	shards, err := q.Inspect().Shards(ctx)
	if err != nil {
		return nil, err
	}
	created, err := q.Inspect().Created(ctx)
	if err != nil {
		return nil, err
	}
	u, err := q.Inspect().Usage(ctx)
	if err != nil {
		return nil, err
	}
	sj := ToStatsJSON(st)
	sj.DueWithin = ToDueWithinJSON(due)
	return NamespaceJSON{Namespace: q.Namespace(), Shards: shards, Created: created, Stats: &sj,
		Quotas: ToQuotasUsageJSON(u)}, nil
}
