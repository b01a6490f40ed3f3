package api

import (
	"context"
	"net/http"

	"github.com/timerq/timerq/queue"
)

// A request is a route's input. read fills it from r's path, query and
// body (decode), checks it, and returns the first problem; a route's call
// then takes it as it is.
type request interface {
	read(h *Handler, w http.ResponseWriter, r *http.Request) error
}

// reply is an answer other than 200 with a JSON body: 201 for a create,
// 204 without a body.
type reply struct {
	status int
	body   any
}

// createdReply answers v with 201 when the request created it, 200 when
// it was there already.
func createdReply(created bool, v any) reply {
	if created {
		return reply{http.StatusCreated, v}
	}
	return reply{http.StatusOK, v}
}

var noContent = reply{status: http.StatusNoContent}

// exec is the executor of every route in a namespace: it opens the
// namespace of r's path, reads and checks the route's request (Req's
// read), runs call under the request's context (ctx), and answers what
// call returns as JSON with 200 (or a reply's status), or its error as a
// problem (fail). When the client is gone it answers nothing.
func exec[Req any, P interface {
	*Req
	request
}](h *Handler, call func(ctx context.Context, q *queue.Queue, req *Req) (any, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := h.serve(w, r, func(q *queue.Queue) (any, error) {
			var req Req
			if err := P(&req).read(h, w, r); err != nil {
				return nil, err
			}
			ctx, cancel := h.ctx(r)
			defer cancel()
			return call(ctx, q, &req)
		}); err != nil && r.Context().Err() == nil {
			h.fail(w, r, err)
		}
	}
}

// serve opens the namespace of r's path, runs call and writes its
// answer; nil when call wrote its own (a stream).
func (h *Handler) serve(w http.ResponseWriter, r *http.Request, call func(q *queue.Queue) (any, error)) error {
	ns := r.PathValue("ns")
	if err := queue.ValidateNamespace(ns); err != nil {
		return err
	}
	q, release, err := h.ns.open(ns)
	if err != nil {
		return err
	}
	defer release()
	v, err := call(q)
	if err != nil || v == nil {
		return err
	}
	rp, ok := v.(reply)
	if !ok {
		rp = reply{http.StatusOK, v}
	}
	if rp.body == nil {
		w.WriteHeader(rp.status)
		return nil
	}
	writeJSON(w, rp.status, rp.body)
	return nil
}

// none is the request of a route that reads nothing but its namespace.
type none struct{}

func (*none) read(*Handler, http.ResponseWriter, *http.Request) error { return nil }

// noQuery is the request of a route that takes no query parameters.
type noQuery struct{}

func (*noQuery) read(_ *Handler, _ http.ResponseWriter, r *http.Request) error {
	_, err := query(r)
	return err
}

// pathID is the request of a route on one timer or schedule: {id}.
type pathID struct{ id string }

func (p *pathID) read(_ *Handler, _ http.ResponseWriter, r *http.Request) error {
	p.id = r.PathValue("id")
	return nil
}

// pathName is the request of a route on one endpoint: {name}.
type pathName struct{ name string }

func (p *pathName) read(_ *Handler, _ http.ResponseWriter, r *http.Request) error {
	p.name = r.PathValue("name")
	return nil
}
