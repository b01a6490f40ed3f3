package ui

// The overview page: counts per shard, the due-time histogram and the fire rate.

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/timerq/timerq/queue"
)

// histEdges are the due-time buckets of the overview histogram.
var histEdges = []time.Duration{time.Minute, 5 * time.Minute, 15 * time.Minute, time.Hour, 6 * time.Hour, 24 * time.Hour, 7 * 24 * time.Hour}

var histLabels = []string{"overdue", "≤1m", "≤5m", "≤15m", "≤1h", "≤6h", "≤1d", "≤7d", ">7d"}

// rateSample is how many of the newest fire events the fire rate and
// lateness are computed from; rateWindow is the span they cover at most.
const (
	rateSample = 1000
	rateWindow = 5 * time.Minute
)

// shardRow is one row of the counts table: one per shard in a namespace
// of several shards, then the total; a single row for one shard.
type shardRow struct {
	Name  string
	Total bool
	Stats queue.Stats
	// Failed is why the shard could not be read; its counts are then
	// zero and left out of the total.
	Failed string
}

type bar struct {
	Label         string
	Count         int64
	X, Y, W, H    int
	TextX, LabelY int
	CountY        int
}

type rateView struct {
	Fires            int
	Window           time.Duration
	PerSecond        string
	P50, P90, P99    time.Duration
	Max              time.Duration
	Truncated        bool // the sample ran out before the window did
	FirstFire, Since time.Time
}

type overviewData struct {
	Now      time.Time
	Shards   []shardRow
	Total    queue.Stats
	Bars     []bar
	Rate     rateView
	Groups   []queue.GroupInfo
	Dead     int64
	Problems []string
	// Workers says who serves the namespace (nil when it could not be
	// read); NoWorker is set when none does and timers are due.
	Workers  *queue.WorkerStatus
	NoWorker bool
	// Quotas is the usage against each of the namespace's quotas, read
	// only (the admin sets them with timerctl or the API); nil when the
	// usage could not be read, QuotasErr then says why.
	Quotas    []quotaRow
	QuotasErr string
}

// quotaRow is one quota of the overview's Quotas table.
type quotaRow struct {
	Name, Label string
	Usage       int64
	// Limit is the quota; 0 is unlimited, and Percent is then left out.
	Limit   int64
	Percent int64
}

// quotaRows lays out the usage against each quota, in the order and by
// the names timerctl stats uses.
func quotaRows(u queue.Usage) []quotaRow {
	rows := []quotaRow{
		{Name: queue.QuotaPending, Label: "Pending timers", Usage: u.Pending, Limit: u.Quotas.Pending},
		{Name: queue.QuotaEndpoints, Label: "Endpoints", Usage: u.Endpoints, Limit: u.Quotas.Endpoints},
		{Name: queue.QuotaSchedules, Label: "Schedules", Usage: u.Schedules, Limit: u.Quotas.Schedules},
	}
	for i, r := range rows {
		if r.Limit > 0 {
			rows[i].Percent = r.Usage * 100 / r.Limit
		}
	}
	return rows
}

func (h *Handler) overview(ctx context.Context, w http.ResponseWriter, r *http.Request) {
	// One failing shard (a slot move) leaves the others' figures, shown
	// with the failed shard marked.
	st, err := h.q.Stats(ctx)
	var partial *queue.ShardError
	if err != nil && !errors.As(err, &partial) {
		h.fail(w, r, statusOf(err), err)
		return
	}
	d := overviewData{Now: st.Now, Total: st}
	if partial != nil {
		d.Problems = append(d.Problems, err.Error())
	}
	if len(st.Shards) > 1 {
		for k, s := range st.Shards {
			row := shardRow{Name: strconv.Itoa(k), Stats: s}
			if partial != nil && partial.Failed[k] != nil {
				row.Failed = partial.Failed[k].Error()
			}
			d.Shards = append(d.Shards, row)
		}
	}
	d.Shards = append(d.Shards, shardRow{Name: "all", Total: true, Stats: st})
	if counts, err := h.q.Inspect().DueHistogram(ctx, st.Now, histEdges); counts == nil {
		d.Problems = append(d.Problems, "histogram: "+err.Error())
	} else {
		d.Bars = bars(counts)
	}
	if ws, err := h.q.Inspect().Workers(ctx); err != nil {
		d.Problems = append(d.Problems, "workers: "+err.Error())
	} else {
		d.Workers = &ws
		d.NoWorker = len(ws.Live) == 0 && st.Overdue > 0
	}
	if evs, _, err := h.q.Inspect().RecentFires(ctx, rateSample); err != nil {
		d.Problems = append(d.Problems, "fire rate: "+err.Error())
	} else {
		d.Rate = fireRate(evs, st.Now)
	}
	if d.Groups, err = h.q.Inspect().Groups(ctx); err != nil {
		d.Problems = append(d.Problems, "consumer groups: "+err.Error())
	}
	if d.Dead, err = h.q.Deliveries().DeadLetterCount(ctx); err != nil {
		d.Problems = append(d.Problems, "dead letters: "+err.Error())
	}
	// Like timerctl stats, unknown rather than a failed page: a user whose
	// ACL line predates quotas may lack +hlen.
	if u, err := h.q.Inspect().Usage(ctx); err != nil {
		d.QuotasErr = err.Error()
	} else {
		d.Quotas = quotaRows(u)
	}
	h.render(w, r, http.StatusOK, "overview", "Overview", d)
}

// bars lays out the histogram as SVG rectangles: attributes, not inline
// styles, so the Content-Security-Policy needs no 'unsafe-inline'.
func bars(counts []int64) []bar {
	const width, height, top, bottom = 720, 160, 18, 20
	maxC := slices.Max(counts)
	slot := width / len(counts)
	out := make([]bar, len(counts))
	for i, c := range counts {
		hgt := 0
		if maxC > 0 {
			hgt = int(float64(height-top-bottom) * float64(c) / float64(maxC))
		}
		if c > 0 && hgt < 2 {
			hgt = 2
		}
		y := height - bottom - hgt
		out[i] = bar{Label: histLabels[i], Count: c, X: i*slot + 6, Y: y, W: slot - 12, H: hgt,
			TextX: i*slot + slot/2, LabelY: height - 5, CountY: y - 4}
	}
	return out
}

// fireRate computes the recent fire rate and lateness percentiles from the
// newest events (newest first), over the last rateWindow by the server
// clock; when more fired in the window than the sample holds, over the span
// the sample covers.
func fireRate(evs []queue.Event, now time.Time) rateView {
	since := now.Add(-rateWindow)
	var late []time.Duration
	oldest := now
	for _, ev := range evs {
		if ev.FiredAt.Before(since) {
			break
		}
		late = append(late, ev.FiredAt.Sub(ev.Due))
		oldest = ev.FiredAt
	}
	v := rateView{Fires: len(late), Window: rateWindow, Since: since}
	if len(late) == len(evs) && len(evs) == rateSample {
		v.Truncated, v.Window = true, max(now.Sub(oldest), time.Millisecond)
	}
	v.PerSecond = strconv.FormatFloat(float64(len(late))/v.Window.Seconds(), 'f', 2, 64)
	if len(late) == 0 {
		return v
	}
	slices.Sort(late)
	pct := func(p float64) time.Duration {
		i := int(p*float64(len(late))+0.999999) - 1
		return late[min(max(i, 0), len(late)-1)]
	}
	v.P50, v.P90, v.P99, v.Max = pct(0.5), pct(0.9), pct(0.99), late[len(late)-1]
	return v
}
