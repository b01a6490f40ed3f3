package ui

import (
	"encoding/json"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/timerq/timerq/queue"
)

// formatTime shows a server time in UTC to the millisecond; zero is a dash.
func formatTime(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return t.UTC().Format("2006-01-02 15:04:05.000Z")
}

// relTime says how far t is from now: "in 4m12s" or "3h0m0s ago".
func relTime(t, now time.Time) string {
	if t.IsZero() {
		return ""
	}
	d := t.Sub(now)
	switch {
	case d > time.Second:
		return "in " + formatDur(d)
	case d < -time.Second:
		return formatDur(-d) + " ago"
	}
	return "now"
}

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
	p := ev.Payload
	if len(p) > 200 {
		p = p[:200]
	}
	payload := string(p)
	if !utf8.Valid(p) {
		payload = "(binary, " + strconv.Itoa(len(ev.Payload)) + " bytes)"
	}
	b, _ := json.Marshal(tailEvent{
		StreamID: ev.StreamID, ID: ev.ID, Link: h.link("/timer", "id", ev.ID),
		Due: formatTime(ev.Due), Fired: formatTime(ev.FiredAt), Lateness: formatDur(ev.FiredAt.Sub(ev.Due)),
		Payload: payload,
	})
	return b
}

func jsonString(s string) []byte {
	b, _ := json.Marshal(s)
	return b
}
