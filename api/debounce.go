package api

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/timerq/timerq/internal/timefmt"
	"github.com/timerq/timerq/queue"
)

// debounceJSON is the body of POST /v1/namespaces/{ns}/debounce/{key}.
type debounceJSON struct {
	Delay       *string         `json:"delay"`
	MaxWait     *string         `json:"max_wait"`
	Payload     json.RawMessage `json:"payload"`
	PayloadText *string         `json:"payload_text"`
	KeepFirst   bool            `json:"keep_first"`
	Deliver     *DeliverJSON    `json:"deliver"`
	// Owner and Labels are the window's timer's, set by the call that
	// opens the window (queue.DebounceOptions.Owner, Labels).
	Owner  *string           `json:"owner"`
	Labels map[string]string `json:"labels"`
}

// DebounceResultJSON is the answer to a debounce call (queue.DebounceResult).
type DebounceResultJSON struct {
	// Outcome is created, pushed or capped.
	Outcome string `json:"outcome"`
	// Timer is the window's timer as the call left it.
	Timer TimerJSON `json:"timer"`
	// Now is the Redis server's clock when the call ran.
	Now string `json:"now"`
	// DeadlineAt is the window's deadline: its opening plus max_wait.
	DeadlineAt string `json:"deadline_at"`
}

// debounceRequest is the path and body of POST .../debounce/{key}.
type debounceRequest struct {
	key string
	o   queue.DebounceOptions
	f   fields
}

func (req *debounceRequest) read(h *Handler, w http.ResponseWriter, r *http.Request) error {
	var j debounceJSON
	if err := h.decode(w, r, &j, false); err != nil {
		return err
	}
	if j.Delay == nil {
		return badRequest("/delay", "no delay: give delay, a duration such as 5s")
	}
	if j.MaxWait == nil {
		return badRequest("/max_wait", "no max_wait: give max_wait, a duration of at least the delay, such as 1m")
	}
	var err error
	if req.o.Delay, err = readDelay(*j.Delay, "/delay"); err != nil {
		return err
	}
	if req.o.MaxWait, err = readDelay(*j.MaxWait, "/max_wait"); err != nil {
		return err
	}
	if req.o.Payload, err = readPayload(j.Payload, j.PayloadText, ""); err != nil {
		return err
	}
	var url string
	if req.o.Endpoint, url, err = readDeliver(j.Deliver, ""); err != nil {
		return err
	}
	if url != "" {
		return badRequest("/deliver/url", "a debounce window delivers to its endpoint's own URL; drop deliver.url, or register an endpoint with that URL")
	}
	if req.o.Owner, err = readOwner(j.Owner, ""); err != nil {
		return err
	}
	req.o.Labels = j.Labels
	req.key, req.o.KeepFirst = r.PathValue("key"), j.KeepFirst
	req.f = fields{text: []bool{j.PayloadText != nil}}
	return nil
}

// debounceKey runs queue.Debounce for the key of its path: 201 when it
// opened a window, 200 when it pushed or capped the open one.
func debounceKey(ctx context.Context, q *queue.Queue, req *debounceRequest) (any, error) {
	res, err := q.Debounce(ctx, req.key, req.o)
	if err == nil {
		return createdReply(res.Outcome == queue.DebounceCreated, ToDebounceResultJSON(res)), nil
	}
	return nil, timerError(err, []queue.NewTimer{{Endpoint: req.o.Endpoint}}, req.f)
}

// ToDebounceResultJSON is res as the API and `timerctl debounce -o json`
// show it.
func ToDebounceResultJSON(res queue.DebounceResult) DebounceResultJSON {
	return DebounceResultJSON{Outcome: string(res.Outcome), Timer: ToTimerJSON(res.Timer),
		Now: timefmt.Format(res.Now), DeadlineAt: timefmt.Format(res.Deadline)}
}
