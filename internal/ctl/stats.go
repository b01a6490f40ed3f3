package ctl

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

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

type statsJSON struct {
	Now              string       `json:"now"`
	Scheduled        int64        `json:"scheduled"`
	Fired            int64        `json:"fired"`
	Cancelled        int64        `json:"cancelled"`
	EarliestDueAt    *string      `json:"earliest_due_at"`
	Overdue          int64        `json:"overdue"`
	OldestOverdueAge int64        `json:"oldest_overdue_age_ms"`
	DueHistogram     []bucketJSON `json:"due_histogram"`
	// Shards holds each shard's counts, one entry per shard.
	Shards []shardStatsJSON `json:"shards"`
}

type shardStatsJSON struct {
	Shard         int     `json:"shard"`
	Scheduled     int64   `json:"scheduled"`
	Fired         int64   `json:"fired"`
	Cancelled     int64   `json:"cancelled"`
	Overdue       int64   `json:"overdue"`
	EarliestDueAt *string `json:"earliest_due_at"`
}

func (r *runner) stats(c *cli.Context) error {
	if err := noArgs(c); err != nil {
		return err
	}
	return r.once(c, func(ctx context.Context, s *session) error {
		st, err := s.q.Stats(ctx)
		if err != nil {
			return s.redisErr(err)
		}
		// Buckets by the server clock, as Stats counts overdue.
		counts, err := s.q.DueHistogram(ctx, st.Now, histogramEdges)
		if err != nil {
			return s.redisErr(err)
		}
		if !s.g.json {
			return writeStats(r, st, counts)
		}
		out := statsJSON{
			Now: fmtJSONTime(st.Now), Scheduled: st.Scheduled, Fired: st.Fired, Cancelled: st.Cancelled,
			EarliestDueAt: optTime(st.EarliestDue), Overdue: st.Overdue, OldestOverdueAge: st.OldestOverdueAge.Milliseconds(),
		}
		for i, n := range counts {
			out.DueHistogram = append(out.DueHistogram, bucketJSON{histogramNames[i], n})
		}
		for k, sh := range st.Shards {
			out.Shards = append(out.Shards, shardStatsJSON{
				Shard: k, Scheduled: sh.Scheduled, Fired: sh.Fired, Cancelled: sh.Cancelled,
				Overdue: sh.Overdue, EarliestDueAt: optTime(sh.EarliestDue),
			})
		}
		return writeJSON(r.o.Stdout, out)
	})
}

func writeStats(r *runner, st queue.Stats, counts []int64) error {
	now := r.o.Now()
	tw := newTable(r.o.Stdout)
	fmt.Fprintf(tw, "scheduled\t%d\n", st.Scheduled)
	fmt.Fprintf(tw, "fired\t%d\n", st.Fired)
	fmt.Fprintf(tw, "cancelled\t%d\n", st.Cancelled)
	if len(st.Shards) > 1 {
		lo, hi := st.Shards[0].Scheduled, st.Shards[0].Scheduled
		for _, sh := range st.Shards {
			lo, hi = min(lo, sh.Scheduled), max(hi, sh.Scheduled)
		}
		fmt.Fprintf(tw, "shards\t%d (scheduled per shard %d..%d; -o json lists each)\n", len(st.Shards), lo, hi)
	}
	fmt.Fprintf(tw, "earliest due\t%s\n", fmtTime(st.EarliestDue, now))
	if st.Overdue > 0 {
		fmt.Fprintf(tw, "overdue\t%d (oldest due %s ago)\n", st.Overdue, short(st.OldestOverdueAge))
	} else {
		fmt.Fprintf(tw, "overdue\t0\n")
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(r.o.Stdout)
	tw = newTable(r.o.Stdout)
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
