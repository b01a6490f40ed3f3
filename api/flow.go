package api

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/timerq/timerq/queue"
)

// FlowPolicyJSON is a flow policy (queue.FlowPolicy) on the wire.
type FlowPolicyJSON struct {
	// Endpoint is the endpoint the policy belongs to; "" or absent for the
	// namespace's.
	Endpoint string `json:"endpoint,omitempty"`
	// Key is the flow key; "" or absent for the default of the scope.
	Key string `json:"key,omitempty"`
	// Rate deliveries of one key per Period, paced.
	Rate int `json:"rate"`
	// Period in Go's syntax, such as "1s" or "1m".
	Period string `json:"period"`
	// MaxInFlight bounds one key's deliveries under way; 0 for none.
	MaxInFlight int `json:"max_in_flight"`
}

type flowPolicyListJSON struct {
	FlowPolicies []FlowPolicyJSON `json:"flow_policies"`
}

// FlowStatJSON is one flow's state in a consumer group (queue.FlowStat).
type FlowStatJSON struct {
	Endpoint string          `json:"endpoint,omitempty"`
	Key      string          `json:"key"`
	Backlog  int64           `json:"backlog"`
	InFlight int64           `json:"in_flight"`
	Policy   *FlowPolicyJSON `json:"policy,omitempty"`
}

type flowStatListJSON struct {
	Flows []FlowStatJSON `json:"flows"`
}

// ToFlowStatJSON is s as the API and `timerctl flow stats -o json` show
// it: without a policy when the key has none.
func ToFlowStatJSON(s queue.FlowStat) FlowStatJSON {
	j := FlowStatJSON{Endpoint: s.Endpoint, Key: s.Key, Backlog: s.Backlog, InFlight: s.InFlight}
	if s.Policy.Rate > 0 {
		p := ToFlowPolicyJSON(s.Policy)
		j.Policy = &p
	}
	return j
}

// ToFlowPolicyJSON is p as the API and `timerctl flow -o json` show it.
func ToFlowPolicyJSON(p queue.FlowPolicy) FlowPolicyJSON {
	return FlowPolicyJSON{Endpoint: p.Endpoint, Key: p.Key, Rate: p.Rate, Period: p.Period.String(), MaxInFlight: p.MaxInFlight}
}

func (h *Handler) listFlowPolicies(w http.ResponseWriter, r *http.Request) {
	if _, err := query(r); err != nil {
		h.fail(w, r, err)
		return
	}
	answer(h, w, r, func(ctx context.Context, q *queue.Queue) (flowPolicyListJSON, error) {
		list, err := q.Flows().Policies(ctx)
		if err != nil {
			return flowPolicyListJSON{}, err
		}
		out := flowPolicyListJSON{FlowPolicies: make([]FlowPolicyJSON, len(list))}
		for i, p := range list {
			out.FlowPolicies[i] = ToFlowPolicyJSON(p)
		}
		return out, nil
	})
}

func (h *Handler) putFlowPolicy(w http.ResponseWriter, r *http.Request) {
	h.inNamespace(w, r, func(q *queue.Queue) error {
		var j FlowPolicyJSON
		if err := h.decode(w, r, &j, false); err != nil {
			return err
		}
		period, err := time.ParseDuration(j.Period)
		if err != nil {
			return invalid(SlugInvalidArgument, "/period", "period %q is not a duration: use Go's syntax, e.g. 1s or 1m", j.Period)
		}
		p := queue.FlowPolicy{Endpoint: j.Endpoint, Key: j.Key, Rate: j.Rate, Period: period, MaxInFlight: j.MaxInFlight}
		ctx, cancel := h.ctx(r)
		defer cancel()
		if err := q.Flows().PutPolicy(ctx, p); err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, ToFlowPolicyJSON(p))
		return nil
	})
}

func (h *Handler) deleteFlowPolicy(w http.ResponseWriter, r *http.Request) {
	v, err := query(r, "endpoint", "key")
	if err != nil {
		h.fail(w, r, err)
		return
	}
	h.inNamespace(w, r, func(q *queue.Queue) error {
		ctx, cancel := h.ctx(r)
		defer cancel()
		found, err := q.Flows().DeletePolicy(ctx, v.Get("endpoint"), v.Get("key"))
		switch {
		case err != nil:
			return err
		case !found:
			WriteProblem(w, problem(http.StatusNotFound, SlugNotFound, "no flow policy for endpoint "+strconv.Quote(v.Get("endpoint"))+
				" and key "+strconv.Quote(v.Get("key"))+"; list them with GET .../flow-policies"))
		default:
			w.WriteHeader(http.StatusNoContent)
		}
		return nil
	})
}

func (h *Handler) groupFlows(w http.ResponseWriter, r *http.Request) {
	v, err := query(r, "limit")
	if err != nil {
		h.fail(w, r, err)
		return
	}
	limit := 0
	if s := v.Get("limit"); s != "" {
		if limit, err = strconv.Atoi(s); err != nil || limit < 1 || limit > queue.MaxFlowStats {
			h.fail(w, r, invalid(SlugInvalidArgument, "", "limit %q is not a number in 1..%d", s, queue.MaxFlowStats))
			return
		}
	}
	answer(h, w, r, func(ctx context.Context, q *queue.Queue) (flowStatListJSON, error) {
		st, err := q.Flows().Stats(ctx, r.PathValue("group"), limit)
		if err != nil {
			return flowStatListJSON{}, err
		}
		out := flowStatListJSON{Flows: make([]FlowStatJSON, len(st))}
		for i, s := range st {
			out.Flows[i] = ToFlowStatJSON(s)
		}
		return out, nil
	})
}
