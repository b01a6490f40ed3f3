package api

import (
	"context"
	"errors"
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

// jsonFields is the JSON field, below its item's pointer, of each Go field
// of queue.NewTimer, queue.Recurring and queue.DebounceOptions that a
// queue.FieldError names: the queue checks the values, once, and the API
// names the field of its request. The wire names follow timerctl's.
var jsonFields = map[string]string{
	"ID": "/id", "Due": "/due_at", "In": "/in", "Payload": "/payload",
	"Endpoint": "/deliver/endpoint", "URL": "/deliver/url", "FlowKey": "/flow_key",
	"Owner": "/owner", "Labels": "/labels", "Epoch": "/epoch", "FireWithin": "/fire_within_ms", "FireBy": "/fire_by",
	"Spec": "/cron", "Location": "/tz", "Every": "/every", "Anchor": "/anchor",
	"CatchUp": "/catch_up", "CatchUpLimit": "/catch_up_limit", "Jitter": "/jitter",
	"End": "/end", "MaxCount": "/max_count", "Ahead": "/ahead", "Overlap": "/overlap",
	"Delay": "/delay", "MaxWait": "/max_wait",
}

// fields says where a request put the fields of the queue values it
// became, to name the one a queue.FieldError refuses.
type fields struct {
	prefix func(i int) string // item i's JSON pointer; nil for the body's
	text   []bool             // item i gave payload_text rather than payload
	pathID bool               // the ID is the path's, not a field of the body
}

// pointer is the JSON pointer of Go field field of item i; "" when the
// body has no such field.
func (f fields) pointer(i int, field string) string {
	p := jsonFields[field]
	switch {
	case p == "" || field == "ID" && f.pathID:
		return ""
	case field == "Payload" && i < len(f.text) && f.text[i]:
		p = "/payload_text"
	}
	if f.prefix != nil {
		p = f.prefix(i) + p
	}
	return p
}

// named returns err naming the JSON field of the queue.FieldError it
// holds, and ok false when it holds none the body has.
func (f fields) named(err error) (_ error, ok bool) {
	var fe *queue.FieldError
	if !errors.As(err, &fe) {
		return err, false
	}
	p := f.pointer(fe.Item, fe.Field)
	if p == "" {
		return err, false
	}
	// The pointer names the batch item; the detail need not.
	return &fieldError{p, fe.Err}, true
}
