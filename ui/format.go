package ui

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/timerq/timerq/internal/payloadfmt"
	"github.com/timerq/timerq/internal/timefmt"
	"github.com/timerq/timerq/queue"
)

// formatTime shows a server time as timerctl does (timefmt.Format: RFC
// 3339, UTC, milliseconds), so it can be pasted into timerctl and into the
// dashboard's own forms; zero is a dash.
func formatTime(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return timefmt.Format(t)
}

// formatLabels shows a timer's labels as KEY=VALUE, in key order, comma
// separated; a dash for none.
func formatLabels(labels map[string]string) string {
	if len(labels) == 0 {
		return "—"
	}
	return strings.Join(labelList(labels), ", ")
}

// parseWhen reads a time from a form by timerctl's rules (timefmt.Parse):
// RFC 3339, or Unix time with its unit (1796238000s, 1796238000000ms);
// empty is none. A bare number is refused, not read as milliseconds.
func parseWhen(s string) (time.Time, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return time.Time{}, nil
	}
	t, err := timefmt.Parse(s)
	if err != nil {
		e := err.(*timefmt.Error)
		return time.Time{}, fmt.Errorf("%q %s: %s", s, e.Problem, e.Fix)
	}
	return t, nil
}

// maxPayloadCell bounds a payload in a table cell, in runes.
const maxPayloadCell = 60

// payloadCell is a payload in a table cell: the preview timerctl prints.
func payloadCell(p []byte) string { return payloadfmt.Preview(p, maxPayloadCell) }

// relTime says how far t is from now: "in 4m12s" or "3h0m0s ago", or
// "now" within a second.
func relTime(t, now time.Time) string { return timefmt.Relative(t, now, time.Second, formatDur) }

// formatDur rounds a duration to a readable precision.
func formatDur(d time.Duration) string {
	switch {
	case d >= time.Hour:
		return d.Round(time.Minute).String()
	case d >= time.Minute:
		return d.Round(time.Second).String()
	case d >= time.Second:
		return d.Round(10 * time.Millisecond).String()
	}
	return d.Round(time.Microsecond * 100).String()
}

// groupDigits writes 1234567 as 1,234,567.
func groupDigits(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := n < 0
	if neg {
		s = s[1:]
	}
	out := make([]byte, 0, len(s)+len(s)/3)
	for i := range len(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	if neg {
		return "-" + string(out)
	}
	return string(out)
}

// tailEvent is one fire event as the live tail's script receives it; the
// script puts each field in a cell with textContent, never as HTML.
type tailEvent struct {
	StreamID string `json:"stream_id"`
	ID       string `json:"id"`
	Link     string `json:"link"`
	Due      string `json:"due"`
	Fired    string `json:"fired"`
	Lateness string `json:"lateness"`
	Payload  string `json:"payload"`
}

func fireJSON(ev queue.Event, h *Handler) []byte {
	b, _ := json.Marshal(tailEvent{
		StreamID: ev.StreamID, ID: ev.ID, Link: h.link("/timer", "id", ev.ID),
		Due: formatTime(ev.Due), Fired: formatTime(ev.FiredAt), Lateness: formatDur(ev.FiredAt.Sub(ev.Due)),
		Payload: payloadCell(ev.Payload),
	})
	return b
}

func jsonString(s string) []byte {
	b, _ := json.Marshal(s)
	return b
}
