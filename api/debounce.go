package api

import (
	"encoding/json"
	"errors"
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

// debounceKey runs queue.Debounce for the key of r's path: 201 when it
// opened a window, 200 when it pushed or capped the open one.
func (h *Handler) debounceKey(w http.ResponseWriter, r *http.Request) {
	var j debounceJSON
	if err := h.decode(w, r, &j, false); err != nil {
		h.fail(w, r, err)
		return
	}
	var o queue.DebounceOptions
	var err error
	switch {
	case j.Delay == nil:
		err = badRequest("/delay", "no delay: give delay, a duration such as 5s")
	case j.MaxWait == nil:
		err = badRequest("/max_wait", "no max_wait: give max_wait, a duration of at least the delay, such as 1m")
	}
	if err == nil {
		o.Delay, err = readDelay(*j.Delay, "/delay")
	}
	if err == nil {
		o.MaxWait, err = readDelay(*j.MaxWait, "/max_wait")
	}
	if err == nil {
		o.Payload, err = readPayload(j.Payload, j.PayloadText, "")
	}
	if err == nil {
		var url string
		o.Endpoint, url, err = h.readDeliver(j.Deliver, "")
		if err == nil && url != "" {
			err = badRequest("/deliver/url", "a debounce window delivers to its endpoint's own URL; drop deliver.url, or register an endpoint with that URL")
		}
	}
	if err != nil {
		h.fail(w, r, err)
		return
	}
	o.KeepFirst = j.KeepFirst
	h.inNamespace(w, r, func(q *queue.Queue) error {
		ctx, cancel := h.ctx(r)
		defer cancel()
		res, err := q.Debounce(ctx, r.PathValue("key"), o)
		if err != nil {
			var field string
			switch {
			case errors.Is(err, queue.ErrPayloadTooLarge):
				field = payloadField(j.PayloadText)
			case errors.Is(err, queue.ErrInvalidOptions):
				field = "/max_wait"
				if o.Delay <= 0 {
					field = "/delay"
				}
			}
			if field != "" {
				err = &fieldError{field, err}
			}
			return unknownEndpoint(err, []queue.NewTimer{{Endpoint: o.Endpoint}}, func(int) string { return "" })
		}
		writeCreated(w, res.Outcome == queue.DebounceCreated, ToDebounceResultJSON(res))
		return nil
	})
}

// ToDebounceResultJSON is res as the API and `timerctl debounce -o json`
// show it.
func ToDebounceResultJSON(res queue.DebounceResult) DebounceResultJSON {
	return DebounceResultJSON{Outcome: string(res.Outcome), Timer: ToTimerJSON(res.Timer),
		Now: timefmt.Format(res.Now), DeadlineAt: timefmt.Format(res.Deadline)}
}
