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

func listFlowPolicies(ctx context.Context, q *queue.Queue, _ *noQuery) (any, error) {
	list, err := q.Flows().Policies(ctx)
	if err != nil {
		return nil, err
	}
	return flowPolicyListJSON{FlowPolicies: mapList(list, ToFlowPolicyJSON)}, nil
}

// flowPolicyRequest is the body of PUT .../flow-policies.
type flowPolicyRequest struct{ p queue.FlowPolicy }

func (req *flowPolicyRequest) read(h *Handler, w http.ResponseWriter, r *http.Request) error {
	var j FlowPolicyJSON
	if err := h.decode(w, r, &j, false); err != nil {
		return err
	}
	period, err := time.ParseDuration(j.Period)
	if err != nil {
		return invalid(SlugInvalidArgument, "/period", "period %q is not a duration: use Go's syntax, e.g. 1s or 1m", j.Period)
	}
	req.p = queue.FlowPolicy{Endpoint: j.Endpoint, Key: j.Key, Rate: j.Rate, Period: period, MaxInFlight: j.MaxInFlight}
	return nil
}

func putFlowPolicy(ctx context.Context, q *queue.Queue, req *flowPolicyRequest) (any, error) {
	return ToFlowPolicyJSON(req.p), q.Flows().PutPolicy(ctx, req.p)
}

// flowKeyRequest is the query of DELETE .../flow-policies.
type flowKeyRequest struct{ endpoint, key string }

func (req *flowKeyRequest) read(_ *Handler, _ http.ResponseWriter, r *http.Request) error {
	v, err := query(r, "endpoint", "key")
	req.endpoint, req.key = v.Get("endpoint"), v.Get("key")
	return err
}

func deleteFlowPolicy(ctx context.Context, q *queue.Queue, req *flowKeyRequest) (any, error) {
	found, err := q.Flows().DeletePolicy(ctx, req.endpoint, req.key)
	if err == nil && !found {
		err = &inputError{http.StatusNotFound, SlugNotFound, "no flow policy for endpoint " + strconv.Quote(req.endpoint) +
			" and key " + strconv.Quote(req.key) + "; list them with GET .../flow-policies", ""}
	}
	return noContent, err
}

// groupFlowsRequest is the path and query of GET .../groups/{group}/flows.
type groupFlowsRequest struct {
	group string
	limit int
}

func (req *groupFlowsRequest) read(_ *Handler, _ http.ResponseWriter, r *http.Request) error {
	v, err := query(r, "limit")
	if err != nil {
		return err
	}
	req.group = r.PathValue("group")
	if s := v.Get("limit"); s != "" {
		if req.limit, err = strconv.Atoi(s); err != nil || req.limit < 1 || req.limit > queue.MaxFlowStats {
			return invalid(SlugInvalidArgument, "", "limit %q is not a number in 1..%d", s, queue.MaxFlowStats)
		}
	}
	return nil
}

func groupFlows(ctx context.Context, q *queue.Queue, req *groupFlowsRequest) (any, error) {
	st, err := q.Flows().Stats(ctx, req.group, req.limit)
	if err != nil {
		return nil, err
	}
	return flowStatListJSON{Flows: mapList(st, ToFlowStatJSON)}, nil
}
