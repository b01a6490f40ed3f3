package api

import (
	"context"
	"net/http"

	"github.com/timerq/timerq/queue"
)

// CancelFilterJSON is a bulk cancel's filter (queue.CancelFilter): the
// body of POST .../timers/cancel, and the filter of a job. A field left
// out selects every timer; at least one of id_prefix, owner and labels is
// needed, and epoch_below needs owner (a job of POST .../owners/{owner}/
// epoch with cancel_older has both).
type CancelFilterJSON struct {
	IDPrefix   string            `json:"id_prefix,omitempty"`
	Owner      string            `json:"owner,omitempty"`
	Labels     map[string]string `json:"labels,omitempty"`
	EpochBelow uint64            `json:"epoch_below,omitempty"`
}

// ToCancelFilterJSON is f as the API shows it.
func ToCancelFilterJSON(f queue.CancelFilter) CancelFilterJSON {
	j := CancelFilterJSON{IDPrefix: f.IDPrefix, Owner: f.Owner, EpochBelow: f.EpochBelow}
	if len(f.Labels) > 0 {
		j.Labels = f.Labels
	}
	return j
}

// cancelFilterBody is CancelFilterJSON as a request sends it, which the
// queue checks: an id_prefix or owner given empty, or an epoch_below of 0,
// is refused, not read as left out, which would select more timers (every
// ID of the owner, every owner's timers of the prefix) than the caller
// named.
type cancelFilterBody struct {
	IDPrefix   *string           `json:"id_prefix"`
	Owner      *string           `json:"owner"`
	Labels     map[string]string `json:"labels"`
	EpochBelow *uint64           `json:"epoch_below"`
}

// filter is j as the queue takes it.
func (j cancelFilterBody) filter() (queue.CancelFilter, error) {
	f := queue.CancelFilter{Labels: j.Labels}
	var err error
	if f.Owner, err = readOwner(j.Owner, ""); err != nil {
		return f, err
	}
	if j.IDPrefix != nil {
		if *j.IDPrefix == "" {
			return f, invalid(SlugInvalidArgument, "/id_prefix", "id_prefix is empty; give the prefix the timers' IDs start with, or leave id_prefix out")
		}
		f.IDPrefix = *j.IDPrefix
	}
	if j.EpochBelow != nil {
		if *j.EpochBelow == 0 {
			return f, invalid(SlugInvalidArgument, "/epoch_below", "epoch_below is 0, which no epoch is below; give 1 or more, or leave epoch_below out")
		}
		f.EpochBelow = *j.EpochBelow
	}
	return f, nil
}

// CancelCountsJSON are a bulk cancel's counts (queue.CancelCounts).
type CancelCountsJSON struct {
	Cancelled        int64 `json:"cancelled"`
	Fired            int64 `json:"fired"`
	AlreadyCancelled int64 `json:"already_cancelled"`
	Skipped          int64 `json:"skipped"`
}

// CancelJobJSON is a bulk cancel job (queue.CancelJob), as the API and
// `timerctl -o json` answer it.
type CancelJobJSON struct {
	ID         string           `json:"id"`
	Filter     CancelFilterJSON `json:"filter"`
	State      string           `json:"state"`
	CreatedAt  string           `json:"created_at"`
	FinishedAt *string          `json:"finished_at"`
	Error      string           `json:"error,omitempty"`
	Counts     CancelCountsJSON `json:"counts"`
	Shards     int              `json:"shards"`
	ShardsDone int              `json:"shards_done"`
}

// ToCancelJobJSON is j as the API answers it.
func ToCancelJobJSON(j queue.CancelJob) CancelJobJSON {
	c := j.Counts
	return CancelJobJSON{
		ID: j.ID, Filter: ToCancelFilterJSON(j.Filter), State: string(j.State),
		CreatedAt: *optTime(j.Created), FinishedAt: optTime(j.Finished), Error: j.Error,
		Counts: CancelCountsJSON{Cancelled: c.Cancelled, Fired: c.Fired, AlreadyCancelled: c.AlreadyCancelled, Skipped: c.Skipped},
		Shards: j.Shards, ShardsDone: j.ShardsDone,
	}
}

type cancelJobListJSON struct {
	CancelJobs []CancelJobJSON `json:"cancel_jobs"`
}

// cancelFilterRequest is the body of POST .../timers/cancel.
type cancelFilterRequest struct{ f queue.CancelFilter }

func (req *cancelFilterRequest) read(h *Handler, w http.ResponseWriter, r *http.Request) error {
	var j cancelFilterBody
	if err := h.decode(w, r, &j, false); err != nil {
		return err
	}
	var err error
	req.f, err = j.filter()
	return err
}

// cancelMatching answers the job: 200 when it ended in the call, 202 when
// the workers finish it.
func cancelMatching(ctx context.Context, q *queue.Queue, req *cancelFilterRequest) (any, error) {
	j, err := q.CancelMatching(ctx, req.f)
	if err != nil {
		return nil, err
	}
	if j.State == queue.CancelJobRunning {
		return reply{http.StatusAccepted, ToCancelJobJSON(j)}, nil
	}
	return ToCancelJobJSON(j), nil
}

func getCancelJob(ctx context.Context, q *queue.Queue, req *pathID) (any, error) {
	j, err := q.CancelJobs().Get(ctx, req.id)
	if err != nil {
		return nil, err
	}
	return ToCancelJobJSON(j), nil
}

func listCancelJobs(ctx context.Context, q *queue.Queue, _ *noQuery) (any, error) {
	list, err := q.CancelJobs().List(ctx)
	if err != nil {
		return nil, err
	}
	return cancelJobListJSON{CancelJobs: mapList(list, ToCancelJobJSON)}, nil
}
