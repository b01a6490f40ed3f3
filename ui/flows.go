package ui

// The flows page: each flow key's backlog, deliveries in flight and policy
// in one consumer group (queue.Flows.Stats, as `timerctl flow stats`
// and the API's GET .../groups/{group}/flows read them).

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/timerq/timerq/queue"
)

// defaultFlowsShown is how many keys the flows page lists by default, the
// largest backlog first; ?top=N asks for up to queue.MaxFlowStats.
const defaultFlowsShown = 50

type flowsData struct {
	Group string
	// Groups are the namespace's consumer groups, to pick one from.
	Groups []string
	Rows   []flowRow
	// Seen is how many keys with a backlog queue.Flows.Stats reported; More is
	// Seen less the rows shown, and Capped that Seen is queue.Flows.Stats's cap,
	// so that more keys may have a backlog.
	Seen, More int
	Capped     bool
	// Backlog and InFlight are the sums over the keys seen.
	Backlog, InFlight int64
	// Top is how many rows were asked for; ShowAll links to the page with
	// every key seen, when some are not shown.
	Top     int
	ShowAll string
	Max     int
}

// flowRow is one flow key as the flows page shows it.
type flowRow struct {
	Endpoint, Key     string
	Backlog, InFlight int64
	// HasPolicy is false when no policy applies any more (deleted while
	// fires were parked).
	HasPolicy bool
	// Scope says whose policy applies: "namespace" or "endpoint NAME";
	// Default that it is the scope's default, not one of the key's own.
	Scope   string
	Default bool
	Rate    string
	Pace    string
	Max     string
	// Full is true when the key's in-flight slots are all taken.
	Full bool
}

// flows lists the flow keys of a consumer group that have fires parked,
// the largest backlog first, top N of them with a count of the rest.
func (h *Handler) flows(ctx context.Context, w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	group := cmp.Or(q.Get("group"), h.opts.DeliveryGroup)
	if err := queue.ValidateConsumerName("group", group); err != nil {
		h.fail(w, r, http.StatusBadRequest, err)
		return
	}
	top := defaultFlowsShown
	if s := q.Get("top"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > queue.MaxFlowStats {
			h.fail(w, r, http.StatusBadRequest, fmt.Errorf("top %q is not a number in 1..%d; give how many keys to list", s, queue.MaxFlowStats))
			return
		}
		top = n
	}
	groups, err := h.q.Inspect().Groups(ctx)
	if h.failed(w, r, err) {
		return
	}
	// All the keys queue.Flows.Stats sees, so that the rest can be counted and
	// summed: it reads every key's backlog to sort them whatever the limit.
	st, err := h.q.Flows().Stats(ctx, group, queue.MaxFlowStats)
	if h.failed(w, r, err) {
		return
	}
	d := flowsData{Group: group, Seen: len(st), Capped: len(st) >= queue.MaxFlowStats, Top: top, Max: queue.MaxFlowStats}
	for _, g := range groups {
		d.Groups = append(d.Groups, g.Name)
	}
	for i, s := range st {
		d.Backlog += s.Backlog
		d.InFlight += s.InFlight
		if i < top {
			d.Rows = append(d.Rows, toFlowRow(s))
		}
	}
	d.More = len(st) - len(d.Rows)
	if d.More > 0 {
		d.ShowAll = h.link("/flows", "group", group, "top", strconv.Itoa(queue.MaxFlowStats))
	}
	h.render(w, r, http.StatusOK, "flows", "Flows", d)
}

func toFlowRow(s queue.FlowStat) flowRow {
	row := flowRow{Endpoint: s.Endpoint, Key: s.Key, Backlog: s.Backlog, InFlight: s.InFlight}
	p := s.Policy
	if p.Rate <= 0 {
		return row
	}
	row.HasPolicy = true
	row.Scope = "namespace"
	if p.Endpoint != "" {
		row.Scope = "endpoint " + p.Endpoint
	}
	row.Default = p.Key == ""
	row.Rate = fmt.Sprintf("%d per %v", p.Rate, p.Period)
	row.Pace = "one every " + (p.Period / time.Duration(p.Rate)).String()
	row.Max = "no bound"
	if p.MaxInFlight > 0 {
		row.Max = strconv.Itoa(p.MaxInFlight)
		row.Full = s.InFlight >= int64(p.MaxInFlight)
	}
	return row
}
