package ctl

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"

	"github.com/urfave/cli/v2"

	"github.com/timerq/timerq/api"
	"github.com/timerq/timerq/queue"
)

// kindSchedule is the "kind" of a schedule line in export's JSON Lines. A
// line without a kind (or with kind "timer") is a timer, so export files
// written before schedules were carried still import.
const kindSchedule = "schedule"

// scheduleExportLine is one schedule as export and `schedules export` write
// it: every field that queue.RecurringTimers.Restore restores, and nothing derived
// (version, next), so that export | import | export is the same text. It
// is the HTTP API's schedule (api.ScheduleJSON) behind a kind, less the
// derived fields: encoding/json lets a field of the outer struct hide the
// embedded field of its name, and these, always nil, are then left out.
type scheduleExportLine struct {
	Kind string `json:"kind"`
	api.ScheduleJSON
	Version *struct{} `json:"version,omitempty"`
	Next    *struct{} `json:"next,omitempty"`
}

func toScheduleExportLine(in queue.RecurringInfo) scheduleExportLine {
	return scheduleExportLine{Kind: kindSchedule, ScheduleJSON: api.ToScheduleJSON(in)}
}

// writeSchedules writes every schedule of the namespace as one JSON line
// each, each page read within --timeout.
func writeSchedules(c *cli.Context, s *session, w io.Writer) error {
	enc := json.NewEncoder(w)
	cursor := ""
	for {
		ctx, cancel := s.ctx(c)
		page, err := s.q.Recurring().List(ctx, queue.RecurringListOptions{Cursor: cursor})
		cancel()
		if err != nil {
			return s.redisErr(err)
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
	return scheduleInfo(j.ScheduleJSON)
}
