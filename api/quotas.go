package api

import (
	"context"
	"net/http"

	"github.com/timerq/timerq/queue"
)

// QuotasJSON is a namespace's quotas (queue.Quotas), the answer of GET
// /v1/namespaces/{ns}/quotas and the body of PUT: the most pending
// timers, endpoints and recurring schedules the namespace may hold; 0 is
// unlimited.
type QuotasJSON struct {
	Pending   int64 `json:"pending"`
	Endpoints int64 `json:"endpoints"`
	Schedules int64 `json:"schedules"`
}

// quotasInJSON is the body of PUT .../quotas: a quota left out takes its
// default (queue.DefaultQuotas).
type quotasInJSON struct {
	Pending   *int64 `json:"pending"`
	Endpoints *int64 `json:"endpoints"`
	Schedules *int64 `json:"schedules"`
}

// QuotaUsageJSON is one quota beside what the namespace holds.
type QuotaUsageJSON struct {
	// Limit is the quota, 0 when unlimited.
	Limit int64 `json:"limit"`
	// Usage is what the namespace holds.
	Usage int64 `json:"usage"`
}

// QuotasUsageJSON is the namespace's usage against each of its quotas, in
// the answer of GET /v1/namespaces/{ns}.
type QuotasUsageJSON struct {
	Pending   QuotaUsageJSON `json:"pending"`
	Endpoints QuotaUsageJSON `json:"endpoints"`
	Schedules QuotaUsageJSON `json:"schedules"`
}

// ToQuotasUsageJSON is u as the API and `timerctl stats -o json` show it.
func ToQuotasUsageJSON(u queue.Usage) *QuotasUsageJSON {
	return &QuotasUsageJSON{
		Pending:   QuotaUsageJSON{Limit: u.Quotas.Pending, Usage: u.Pending},
		Endpoints: QuotaUsageJSON{Limit: u.Quotas.Endpoints, Usage: u.Endpoints},
		Schedules: QuotaUsageJSON{Limit: u.Quotas.Schedules, Usage: u.Schedules},
	}
}

func (h *Handler) getQuotas(ctx context.Context, q *queue.Queue, _ *none) (any, error) {
	v, err := queue.NamespaceQuotas(ctx, h.opts.Client, q.Namespace())
	return QuotasJSON(v), err
}

// quotasRequest is the body of PUT .../quotas.
type quotasRequest struct{ v queue.Quotas }

func (req *quotasRequest) read(h *Handler, w http.ResponseWriter, r *http.Request) error {
	var j quotasInJSON
	if err := h.decode(w, r, &j, false); err != nil {
		return err
	}
	req.v = queue.DefaultQuotas
	setGiven(&req.v.Pending, j.Pending)
	setGiven(&req.v.Endpoints, j.Endpoints)
	setGiven(&req.v.Schedules, j.Schedules)
	return nil
}

func (h *Handler) putQuotas(ctx context.Context, q *queue.Queue, req *quotasRequest) (any, error) {
	if err := queue.SetQuotas(ctx, h.opts.Client, q.Namespace(), req.v); err != nil {
		return nil, err
	}
	// This replica applies them to its next request; the others within a
	// second.
	h.ns.forget(q.Namespace())
	return QuotasJSON(req.v), nil
}
