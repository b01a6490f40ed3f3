package ctl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/timerq/timerq/api"
	"github.com/timerq/timerq/cmd/internal/cliconf"
	"github.com/timerq/timerq/queue"
)

// histogramEdges are the upper bounds of the due-time buckets after
// "overdue"; the last bucket, "later", is open.
var (
	histogramEdges = []time.Duration{time.Minute, time.Hour, 24 * time.Hour, 7 * 24 * time.Hour}
	histogramNames = []string{"overdue", "next minute", "next hour", "next day", "next week", "later"}
)

// barWidth is the longest histogram bar, in cells.
const barWidth = 40

type bucketJSON struct {
	Bucket string `json:"bucket"`
	Count  int64  `json:"count"`
}

// statsJSON is `timerctl stats -o json`: the API's stats of the
// namespace (api.StatsJSON), and what only timerctl reads beside them.
type statsJSON struct {
	api.StatsJSON
	DueHistogram []bucketJSON `json:"due_histogram"`
	// Shards holds each shard's counts, one entry per shard, in place of
	// the API's list.
	Shards []shardStatsJSON `json:"shards"`
	// Workers says who serves the namespace; null when it could not be read.
	Workers *workersJSON `json:"workers"`
	// Quotas is the usage against each of the namespace's quotas; null
	// when it could not be read.
	Quotas *api.QuotasUsageJSON `json:"quotas"`
}

type workersJSON struct {
	Serving    int      `json:"serving"`
	Live       []string `json:"live"`
	LastSeenAt *string  `json:"last_seen_at"`
	LastWorker string   `json:"last_worker"`
	LastLeft   bool     `json:"last_left"`
}

// shardStatsJSON is one shard's stats as the API shows them, with its
// index.
type shardStatsJSON struct {
	Shard int `json:"shard"`
	api.StatsJSON
	// Error is why the shard could not be read; its counts are then 0 and
	// left out of the totals.
	Error string `json:"error,omitempty"`
}

func (r *runner) stats(c *cli.Context) error {
	return r.once(c, func(ctx context.Context, s *session) error {
		// One failing shard (a slot move) leaves the others' figures,
		// printed with the failed shard marked; the exit code says it.
		var partial *queue.ShardError
		st, err := s.q.Stats(ctx)
		if err := keepPartial(err, &partial); err != nil {
			return err
		}
		// Buckets by the server clock, as Stats counts overdue.
		counts, err := s.q.Inspect().DueHistogram(ctx, st.Now, histogramEdges)
		if err := keepPartial(err, &partial); err != nil {
			return err
		}
		// The due horizon: cumulative, by each shard's server clock, the
		// counts timerworker exports as timerq_namespace_due_timers.
		due, err := s.q.Inspect().DueHorizon(ctx, queue.DueHorizonBounds)
		if err := keepPartial(err, &partial); err != nil {
			return err
		}
		ws, werr := s.q.Inspect().Workers(ctx)
		r.warnWorkers(ctx, s, st, ws, werr, partial != nil)
		// Like the workers, unknown rather than a failure: a user whose
		// ACL line predates quotas may lack +hlen.
		u, uerr := s.q.Inspect().Usage(ctx)
		out := statsJSON{StatsJSON: api.ToStatsJSON(st)}
		out.DueWithin = api.ToDueWithinJSON(due)
		shards := out.StatsJSON.Shards
		out.StatsJSON.Shards = nil // listed by out.Shards
		for i, n := range counts {
			out.DueHistogram = append(out.DueHistogram, bucketJSON{histogramNames[i], n})
		}
		for k, sh := range shards {
			row := shardStatsJSON{Shard: k, StatsJSON: sh}
			if partial != nil && partial.Failed[k] != nil {
				row.Error = partial.Failed[k].Error()
			}
			out.Shards = append(out.Shards, row)
		}
		if werr == nil {
			out.Workers = &workersJSON{Serving: len(ws.Live), Live: mapList(ws.Live, func(m queue.Worker) string { return m.ID }),
				LastSeenAt: optTime(ws.LastSeen), LastWorker: ws.LastWorker, LastLeft: ws.LastLeft}
		}
		if uerr == nil {
			out.Quotas = api.ToQuotasUsageJSON(u)
		}
		err = r.emit(s.g, out, func(w io.Writer) error { return writeStats(w, r.o.Now(), st, counts, due, ws, werr, u, uerr, partial) })
		if err != nil {
			return err
		}
		return shardFailure(s, partial)
	})
}

// keepPartial returns err unless it is a *queue.ShardError (some shards
// read), which it keeps in *partial if that holds none yet.
func keepPartial(err error, partial **queue.ShardError) error {
	var p *queue.ShardError
	if err == nil || !errors.As(err, &p) {
		return err
	}
	if *partial == nil {
		*partial = p
	}
	return nil
}

// shardFailure is stats' error when some shards could not be read: their
// figures are missing from what it printed.
func shardFailure(s *session, partial *queue.ShardError) error {
	if partial == nil {
		return nil
	}
	shards := slices.Sorted(maps.Keys(partial.Failed))
	names := make([]string, len(shards))
	for i, k := range shards {
		names[i] = strconv.Itoa(k)
	}
	cause := s.redisErr(partial.Failed[shards[0]])
	fix := "the figures above are the other shards'"
	var e *Error
	if errors.As(cause, &e) && e.Fix != "" {
		fix += "; " + e.Fix
	}
	return &Error{Code: ExitFailure, Problem: fmt.Sprintf("stats could not read shard %s: %v",
		strings.Join(names, ", "), strings.TrimPrefix(partial.Failed[shards[0]].Error(), "timerq: ")), Fix: fix, Err: partial}
}

// ofQuota is a usage against its quota: "5 of 100 (5%)", "5 (unlimited)".
func ofQuota(usage, limit int64) string {
	if limit <= 0 {
		return fmt.Sprintf("%d (unlimited)", usage)
	}
	return fmt.Sprintf("%d of %d (%d%%)", usage, limit, usage*100/limit)
}

// workersLine says how many workers serve the namespace and when one was
// last seen, by the Redis clock.
func workersLine(ws queue.WorkerStatus) string {
	line := fmt.Sprintf("%d serving this namespace", len(ws.Live))
	switch {
	case ws.LastSeen.IsZero():
		line += " (never seen)"
	case len(ws.Live) > 0:
		line += " (last seen " + relative(ws.LastSeen, ws.Now) + ")"
	case ws.LastLeft:
		line += fmt.Sprintf(" (last seen %s: %s stopped)", relative(ws.LastSeen, ws.Now), ws.LastWorker)
	default:
		line += fmt.Sprintf(" (last seen %s: %s stopped heartbeating)", relative(ws.LastSeen, ws.Now), ws.LastWorker)
	}
	return line
}

// warnWorkers warns on stderr when timers are due and no worker serves the
// namespace, or when the namespace holds nothing at all (a mistyped -n).
func (r *runner) warnWorkers(ctx context.Context, s *session, st queue.Stats, ws queue.WorkerStatus, werr error, partial bool) {
	if werr != nil {
		return
	}
	ns := s.q.Namespace()
	if len(ws.Live) == 0 && st.Overdue > 0 {
		fmt.Fprintf(r.o.Stderr, "timerctl: warning: %d timers are due and no worker serves namespace %s (last seen %s): "+
			"they fire once a timerworker runs with --namespace %s\n", st.Overdue, ns, lastSeen(ws), ns)
	}
	if !partial && st.Scheduled+st.Fired+st.Cancelled == 0 {
		r.warnIfNothing(ctx, s, &ws)
	}
}

func lastSeen(ws queue.WorkerStatus) string {
	if ws.LastSeen.IsZero() {
		return "never"
	}
	return relative(ws.LastSeen, ws.Now)
}

// warnIfNothing warns on stderr when the namespace holds nothing at all: no
// meta key (never created), no timers, and no worker ever heartbeating. It
// is almost always a mistyped --namespace, which would otherwise print an
// empty table and exit 0. ws is the namespace's workers if already read.
// It stays quiet when it cannot tell.
func (r *runner) warnIfNothing(ctx context.Context, s *session, ws *queue.WorkerStatus) {
	created, err := s.q.Inspect().Created(ctx)
	if err != nil || created {
		return
	}
	st, err := s.q.Stats(ctx)
	if err != nil || st.Scheduled+st.Fired+st.Cancelled > 0 {
		return
	}
	if ws == nil {
		w, err := s.q.Inspect().Workers(ctx)
		if err != nil {
			return
		}
		ws = &w
	}
	if len(ws.Live) > 0 || !ws.LastSeen.IsZero() {
		return
	}
	fmt.Fprintf(r.o.Stderr, "timerctl: warning: namespace %s holds nothing; check -n/TIMERQ_NAMESPACE\n", s.q.Namespace())
}

func writeStats(w io.Writer, now time.Time, st queue.Stats, counts []int64, due queue.DueHorizon, ws queue.WorkerStatus, werr error,
	u queue.Usage, uerr error, partial *queue.ShardError) error {
	tw := newTable(w)
	fmt.Fprintf(tw, "scheduled\t%d\n", st.Scheduled)
	fmt.Fprintf(tw, "fired\t%d\n", st.Fired)
	fmt.Fprintf(tw, "cancelled\t%d\n", st.Cancelled)
	if len(st.Shards) > 1 {
		var lo, hi int64 = -1, 0
		for k, sh := range st.Shards {
			if partial != nil && partial.Failed[k] != nil {
				continue
			}
			if lo < 0 {
				lo, hi = sh.Scheduled, sh.Scheduled
			}
			lo, hi = min(lo, sh.Scheduled), max(hi, sh.Scheduled)
		}
		fmt.Fprintf(tw, "shards\t%d (scheduled per shard %d..%d; -o json lists each)\n", len(st.Shards), max(lo, 0), hi)
	}
	if partial != nil {
		for _, k := range slices.Sorted(maps.Keys(partial.Failed)) {
			fmt.Fprintf(tw, "shard %d\tFAILED, left out of these figures: %s\n", k, cliconf.OneLine(strings.TrimPrefix(partial.Failed[k].Error(), "timerq: ")))
		}
	}
	fmt.Fprintf(tw, "earliest due\t%s\n", fmtTime(st.EarliestDue, now))
	if st.Overdue > 0 {
		fmt.Fprintf(tw, "overdue\t%d (oldest due %s ago)\n", st.Overdue, short(st.OldestOverdueAge))
	} else {
		fmt.Fprintf(tw, "overdue\t0\n")
	}
	within := make([]string, len(due.Within))
	for i, w := range due.Within {
		within[i] = fmt.Sprintf("%s %d", queue.HorizonName(w), due.Due[i])
	}
	fmt.Fprintf(tw, "due within\t%s (cumulative)\n", strings.Join(within, ", "))
	if werr != nil {
		fmt.Fprintf(tw, "workers\tunknown: %s\n", cliconf.OneLine(strings.TrimPrefix(werr.Error(), "timerq: ")))
	} else {
		fmt.Fprintf(tw, "workers\t%s\n", workersLine(ws))
	}
	if uerr != nil {
		fmt.Fprintf(tw, "quotas\tunknown: %s\n", cliconf.OneLine(strings.TrimPrefix(uerr.Error(), "timerq: ")))
	} else {
		fmt.Fprintf(tw, "quotas\tpending %s, endpoints %s, schedules %s\n", ofQuota(u.Pending, u.Quotas.Pending),
			ofQuota(u.Endpoints, u.Quotas.Endpoints), ofQuota(u.Schedules, u.Quotas.Schedules))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	tw = newTable(w)
	fmt.Fprintf(tw, "DUE\tTIMERS\n")
	var most int64
	for _, n := range counts {
		most = max(most, n)
	}
	for i, n := range counts {
		// No trailing tab when there is no bar, so no trailing spaces.
		if b := bar(n, most); b != "" {
			fmt.Fprintf(tw, "%s\t%d\t%s\n", histogramNames[i], n, b)
		} else {
			fmt.Fprintf(tw, "%s\t%d\n", histogramNames[i], n)
		}
	}
	return tw.Flush()
}

// bar draws n against most; any non-zero count gets at least one cell, so
// a lone overdue timer is visible next to a million later ones.
func bar(n, most int64) string {
	if n == 0 || most == 0 {
		return ""
	}
	w := int(n * barWidth / most)
	return strings.Repeat("█", max(w, 1))
}
