package ctl

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/timerq/timerq/queue"
)

// kindSchedule is the "kind" of a schedule line in export's JSON Lines. A
// line without a kind (or with kind "timer") is a timer, so export files
// written before schedules were carried still import.
const kindSchedule = "schedule"

// scheduleExportLine is one schedule as export and `schedules export` write
// it: every field that queue.RecurringTimers.Restore restores, and nothing derived
// (version, next), so that export | import | export is the same text.
type scheduleExportLine struct {
	Kind         string           `json:"kind"`
	ID           string           `json:"id"`
	Cron         string           `json:"cron,omitempty"`
	TZ           string           `json:"tz,omitempty"`
	Every        string           `json:"every,omitempty"`
	Anchor       *string          `json:"anchor,omitempty"`
	State        string           `json:"state"`
	Payload      []byte           `json:"payload"`
	CatchUp      string           `json:"catch_up"`
	CatchUpLimit int              `json:"catch_up_limit"`
	Jitter       string           `json:"jitter"`
	End          *string          `json:"end"`
	MaxCount     int64            `json:"max_count"`
	Ahead        int              `json:"ahead"`
	Overlap      string           `json:"overlap"`
	Deliver      *deliverJSON     `json:"deliver,omitempty"`
	FlowKey      string           `json:"flow_key,omitempty"`
	Count        int64            `json:"count"`
	Last         *string          `json:"last"`
	Pending      []occurrenceJSON `json:"pending"`
	CreatedAt    string           `json:"created_at"`
	UpdatedAt    string           `json:"updated_at"`
}

func toScheduleExportLine(in queue.RecurringInfo) scheduleExportLine {
	j := toScheduleJSON(in)
	return scheduleExportLine{Kind: kindSchedule, ID: j.ID, Cron: j.Cron, TZ: j.TZ, Every: j.Every, Anchor: j.Anchor,
		State: j.State, Payload: j.Payload, CatchUp: j.CatchUp, CatchUpLimit: j.CatchUpLimit, Jitter: j.Jitter,
		End: j.End, MaxCount: j.MaxCount, Ahead: j.Ahead, Overlap: j.Overlap, Deliver: j.Deliver, FlowKey: j.FlowKey, Count: j.Count, Last: j.Last,
		Pending: j.Pending, CreatedAt: j.CreatedAt, UpdatedAt: j.UpdatedAt}
}

// writeSchedules writes every schedule of the namespace as one JSON line
// each; ctx makes one context per page.
func writeSchedules(s *session, ctx func() (context.Context, context.CancelFunc), w io.Writer) error {
	enc := json.NewEncoder(w)
	cursor := ""
	for {
		c, cancel := ctx()
		page, err := s.q.Recurring().List(c, cursor, 0)
		cancel()
		if err != nil {
			return recurringErr(s, err)
		}
		for _, in := range page.Schedules {
			if err := enc.Encode(toScheduleExportLine(in)); err != nil {
				return err
			}
		}
		if cursor = page.NextCursor; cursor == "" {
			return nil
		}
	}
}

// lineKind returns the "kind" of an import line: "" for a timer (no kind,
// or "timer"), kindSchedule, kindQuarantined, or an error for another kind.
func lineKind(line []byte) (string, error) {
	if !bytes.Contains(line, []byte(`"kind"`)) {
		return "", nil // the common case, a timer, pays one scan
	}
	var k struct {
		Kind *string `json:"kind"`
	}
	if err := json.Unmarshal(line, &k); err != nil || k.Kind == nil {
		return "", nil // the timer parser reports what is wrong
	}
	switch *k.Kind {
	case "timer":
		return "", nil
	case kindSchedule, kindQuarantined:
		return *k.Kind, nil
	}
	return "", fmt.Errorf("kind %q is not timer, schedule or quarantined", *k.Kind)
}

// scheduleImportJSON is what a schedule line may hold: the export line,
// and the derived fields of the schedule JSON that `schedules export`
// wrote before it had a kind (ignored).
type scheduleImportJSON struct {
	Kind string `json:"kind"`
	scheduleJSON
}

// parseScheduleLine reads one schedule line of an import.
func parseScheduleLine(line []byte) (queue.RecurringInfo, error) {
	var j scheduleImportJSON
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&j); err != nil {
		return queue.RecurringInfo{}, fmt.Errorf("not an exported schedule: %v", err)
	}
	if j.Kind != "" && j.Kind != kindSchedule {
		return queue.RecurringInfo{}, fmt.Errorf("kind %q is not schedule", j.Kind)
	}
	return j.scheduleJSON.info()
}
