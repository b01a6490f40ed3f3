package ctl

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/timerq/timerq/internal/payloadfmt"
	"github.com/timerq/timerq/internal/timefmt"
	"github.com/timerq/timerq/queue"
)

// The JSON shapes of timers, attempt logs and schedules are the HTTP
// API's (api.TimerJSON and the rest), so that a client reads both alike;
// docs/timerctl.md documents them.

// writeAttempts adds a timer's attempt log to writeRecord's table: one
// row per attempt, oldest first.
func writeAttempts(tw io.Writer, log []queue.DeliveryAttempt, now time.Time) {
	for _, a := range log {
		status := "no answer"
		if a.Status != 0 {
			status = fmt.Sprintf("HTTP %d", a.Status)
		}
		line := fmt.Sprintf("#%d %s, %s in %v: %s", a.Attempt, fmtTime(a.At, now), status, a.Latency.Round(10*time.Microsecond), a.Outcome)
		if a.Reason != "" {
			line += " (" + a.Reason + ")"
		}
		if a.RetryIn > 0 {
			line += ", next in " + a.RetryIn.String()
		}
		if a.Error != "" {
			line += ": " + strconv.Quote(a.Error)
		}
		fmt.Fprintf(tw, "attempt\t%s\n", line)
	}
}

// optTime is nil, hence null, for the zero time.
func optTime(t time.Time) *string {
	if t.IsZero() {
		return nil
	}
	s := timefmt.Format(t)
	return &s
}

// mapList converts each of in; the result is never nil, so that JSON
// output shows an empty list as [], not null.
func mapList[T, J any](in []T, to func(T) J) []J {
	out := make([]J, len(in))
	for i, v := range in {
		out[i] = to(v)
	}
	return out
}

// emit prints v as JSON under -o json, and otherwise runs text.
func (r *runner) emit(g global, v any, text func(w io.Writer) error) error {
	if g.json {
		return writeJSON(r.o.Stdout, v)
	}
	return text(r.o.Stdout)
}

// emitf is emit whose text is one format: most commands' one-line answer.
func (r *runner) emitf(g global, v any, format string, args ...any) error {
	return r.emit(g, v, func(w io.Writer) error {
		_, err := fmt.Fprintf(w, format, args...)
		return err
	})
}

// writeRows prints items as a table under header, a row each; none, if
// not "", is printed instead of an empty table.
func writeRows[T any](w io.Writer, none, header string, items []T, row func(T) string) error {
	if len(items) == 0 && none != "" {
		_, err := fmt.Fprintln(w, none)
		return err
	}
	tw := newTable(w)
	fmt.Fprintln(tw, header)
	for _, it := range items {
		fmt.Fprintln(tw, row(it))
	}
	return tw.Flush()
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// fmtTime is a time for tables: RFC 3339 UTC and, beside it, how far it is
// from now.
func fmtTime(t, now time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339) + " (" + relative(t, now) + ")"
}

// relative says "in 4m12s", "3h ago" or "now" (within half a second, which
// short would round to 0s), with at most two units so that it reads at a
// glance.
func relative(t, now time.Time) string { return timefmt.Relative(t, now, 500*time.Millisecond, short) }

// short formats d with its two largest units: 42s, 4m12s, 3h, 3h5m, 2d4h.
func short(d time.Duration) string {
	d = d.Round(time.Second)
	if d < time.Second {
		d = time.Second
	}
	units := []struct {
		size time.Duration
		name string
	}{{24 * time.Hour, "d"}, {time.Hour, "h"}, {time.Minute, "m"}, {time.Second, "s"}}
	for i, u := range units {
		if d < u.size {
			continue
		}
		s := strconv.FormatInt(int64(d/u.size), 10) + u.name
		if i+1 < len(units) {
			next := units[i+1]
			if n := (d % u.size) / next.size; n > 0 {
				s += strconv.FormatInt(int64(n), 10) + next.name
			}
		}
		return s
	}
	return "0s"
}

// lateness prints d in milliseconds below a second ("3ms", "0ms"), and in
// Go's form above ("1.25s").
func lateness(d time.Duration) string {
	if d > -time.Second && d < time.Second {
		return strconv.FormatInt(d.Milliseconds(), 10) + "ms"
	}
	return d.Round(time.Millisecond).String()
}

// maxPayloadCell bounds a payload in a table cell, in runes.
const maxPayloadCell = 48

// fmtPayload shows a payload as the dashboard does (payloadfmt.Preview):
// text when it is printable on one line, otherwise its size and first
// bytes in hex; a dash when empty.
func fmtPayload(p []byte) string {
	if len(p) == 0 {
		return "-"
	}
	return payloadfmt.Preview(p, maxPayloadCell)
}

func newTable(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
}

// writeRecord prints one timer as a two-column table; note, if set, is an
// extra "result" row (schedule says whether it created the timer).
func writeRecord(w io.Writer, t queue.Timer, now time.Time, note string, log ...queue.DeliveryAttempt) error {
	tw := newTable(w)
	fmt.Fprintf(tw, "id\t%s\n", t.ID)
	fmt.Fprintf(tw, "state\t%s\n", t.State)
	fmt.Fprintf(tw, "due\t%s\n", fmtTime(t.Due, now))
	fmt.Fprintf(tw, "created\t%s\n", fmtTime(t.CreatedAt, now))
	if !t.FiredAt.IsZero() {
		fmt.Fprintf(tw, "fired\t%s\n", fmtTime(t.FiredAt, now))
		// Seconds in the times above would hide it: timers fire
		// milliseconds late, by the server's clock.
		fmt.Fprintf(tw, "late\t%s\n", lateness(t.FiredAt.Sub(t.Due)))
	}
	if !t.CancelledAt.IsZero() {
		fmt.Fprintf(tw, "cancelled\t%s\n", fmtTime(t.CancelledAt, now))
	}
	writeTimerMeta(tw, t, now)
	fmt.Fprintf(tw, "payload\t%s\n", fmtPayload(t.Payload))
	writeAttempts(tw, log, now)
	if note != "" {
		fmt.Fprintf(tw, "result\t%s\n", note)
	}
	return tw.Flush()
}

// writeList prints timers as a table, one per row; with OWNER and EPOCH
// columns when any of them has an owner.
func writeList(w io.Writer, ts []queue.Timer, now time.Time) error {
	owned := slices.ContainsFunc(ts, func(t queue.Timer) bool { return t.Owner != "" })
	tw := newTable(w)
	fmt.Fprint(tw, "ID\tSTATE\tDUE\t")
	if owned {
		fmt.Fprint(tw, ownerHeads)
	}
	fmt.Fprintln(tw, "PAYLOAD")
	for _, t := range ts {
		fmt.Fprintf(tw, "%s\t%s\t%s\t", t.ID, t.State, fmtTime(t.Due, now))
		if owned {
			fmt.Fprint(tw, ownerCells(t.Owner, t.Epoch))
		}
		fmt.Fprintf(tw, "%s\n", fmtPayload(t.Payload))
	}
	return tw.Flush()
}
