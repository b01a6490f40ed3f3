package api

import (
	"context"
	"net/http"

	"github.com/timerq/timerq/queue"
)

// The owner routes: an owner's fencing epoch and next wake
// (queue.Queue.Epoch, NextWake), and the bump of its epoch
// (queue.Queue.BumpEpoch). The owner is the {owner} segment as the router
// read it, unescaped: the one the route's right was checked with.

// OwnerJSON is where an owner stands: GET .../owners/{owner}.
type OwnerJSON struct {
	Owner string `json:"owner"`
	// Epoch is the owner's current fencing epoch, 0 until first bumped.
	Epoch uint64 `json:"epoch"`
	// Scheduled is how many of its timers are scheduled, and NextWakeAt
	// the earliest due time among them (null for none).
	Scheduled  int64   `json:"scheduled"`
	NextWakeAt *string `json:"next_wake_at"`
}

// BumpedJSON is the answer of POST .../owners/{owner}/epoch: the owner's
// new epoch, and the bulk cancel of its older timers when cancel_older
// asked for one.
type BumpedJSON struct {
	Owner     string         `json:"owner"`
	Epoch     uint64         `json:"epoch"`
	CancelJob *CancelJobJSON `json:"cancel_job,omitempty"`
}

// bumpJSON is the body of POST .../owners/{owner}/epoch, which may be
// left empty.
type bumpJSON struct {
	CancelOlder bool `json:"cancel_older"`
}

// pathOwner is the request of GET .../owners/{owner}, which takes no
// query parameters.
type pathOwner struct{ owner string }

func (p *pathOwner) read(_ *Handler, _ http.ResponseWriter, r *http.Request) error {
	p.owner = r.PathValue("owner")
	_, err := query(r)
	return err
}

// bumpRequest is the path and body of POST .../owners/{owner}/epoch.
type bumpRequest struct {
	owner string
	o     queue.BumpOptions
}

func (req *bumpRequest) read(h *Handler, w http.ResponseWriter, r *http.Request) error {
	if _, err := query(r); err != nil {
		return err
	}
	var j bumpJSON
	if err := h.decode(w, r, &j, true); err != nil {
		return err
	}
	req.owner, req.o = r.PathValue("owner"), queue.BumpOptions{CancelOlder: j.CancelOlder}
	return nil
}

// getOwner answers the owner's epoch and next wake; the queue checks the
// owner.
func getOwner(ctx context.Context, q *queue.Queue, req *pathOwner) (any, error) {
	epoch, err := q.Epoch(ctx, req.owner)
	if err != nil {
		return nil, err
	}
	w, err := q.NextWake(ctx, req.owner)
	if err != nil {
		return nil, err
	}
	return OwnerJSON{Owner: req.owner, Epoch: epoch, Scheduled: w.Scheduled, NextWakeAt: optTime(w.Next)}, nil
}

// bumpEpoch raises the owner's epoch and answers it, with the bulk cancel
// job of its older timers when asked: done, or running in the workers
// (its state says which).
func bumpEpoch(ctx context.Context, q *queue.Queue, req *bumpRequest) (any, error) {
	b, err := q.BumpEpoch(ctx, req.owner, req.o)
	if err != nil {
		return nil, err
	}
	out := BumpedJSON{Owner: req.owner, Epoch: b.Epoch}
	if b.Cancel != nil {
		j := ToCancelJobJSON(*b.Cancel)
		out.CancelJob = &j
	}
	return out, nil
}
