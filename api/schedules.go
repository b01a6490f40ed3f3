package api

import (
	"cmp"
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/timerq/timerq/internal/timefmt"
	"github.com/timerq/timerq/queue"
)

// scheduleSpecJSON is a schedule's spec, payload and policies, with the
// names of timerctl's flags and of `timerctl schedules export`.
type scheduleSpecJSON struct {
	Cron         *string         `json:"cron"`
	TZ           *string         `json:"tz"`
	Every        *string         `json:"every"`
	Anchor       json.RawMessage `json:"anchor"`
	Payload      json.RawMessage `json:"payload"`
	PayloadText  *string         `json:"payload_text"`
	CatchUp      *string         `json:"catch_up"`
	CatchUpLimit *int            `json:"catch_up_limit"`
	Jitter       *string         `json:"jitter"`
	End          json.RawMessage `json:"end"`
	MaxCount     *int64          `json:"max_count"`
	Ahead        *int            `json:"ahead"`
	Overlap      *string         `json:"overlap"`
	Deliver      *DeliverJSON    `json:"deliver"`
	FlowKey      *string         `json:"flow_key"`
	// Owner and Labels are each occurrence's (queue.Recurring.Owner,
	// Labels). A PUT replaces the schedule, so it gives the owner again:
	// an owner cannot change.
	Owner  *string           `json:"owner"`
	Labels map[string]string `json:"labels"`
}

type newScheduleJSON struct {
	ID *string `json:"id"`
	scheduleSpecJSON
}

func given(raw json.RawMessage) bool { return len(raw) > 0 && string(raw) != "null" }

// setGiven sets *dst to the value of a field the body gave (v not nil),
// and leaves it as it is otherwise.
func setGiven[T any](dst *T, v *T) {
	if v != nil {
		*dst = *v
	}
}

// readSpec reads j's timing, a cron spec or an interval, into rec.
func readSpec(j scheduleSpecJSON, rec *queue.Recurring) error {
	switch {
	case j.Cron != nil && j.Every != nil:
		return invalid(SlugInvalidSchedule, "/every", "both cron and every are given; give one")
	case j.Cron != nil:
		// The queue checks the spec; given empty, it would read none.
		if *j.Cron == "" {
			return invalid(SlugInvalidSchedule, "/cron", "cron is empty; give a cron spec such as \"*/5 * * * *\" or @daily")
		}
		rec.Spec = *j.Cron
		if j.TZ != nil {
			loc, err := time.LoadLocation(*j.TZ)
			if err != nil || *j.TZ == "" || *j.TZ == "Local" {
				return invalid(SlugInvalidSchedule, "/tz", "tz %q is not an IANA time zone; use one such as Europe/Berlin, or leave tz out for UTC", *j.TZ)
			}
			rec.Location = loc
		}
		if given(j.Anchor) {
			return invalid(SlugInvalidSchedule, "/anchor", "anchor goes with every, not with cron; drop it")
		}
	case j.Every != nil:
		d, err := readDelay(*j.Every, "/every")
		if err != nil {
			return err
		}
		// The queue checks the interval; given as 0, it would read none.
		if d == 0 {
			return invalid(SlugInvalidSchedule, "/every", "every %q is zero; give an interval of 1ms or more, such as 90s", *j.Every)
		}
		rec.Every = d
		if j.TZ != nil {
			return invalid(SlugInvalidSchedule, "/tz", "tz goes with cron, not with every; drop it")
		}
		if given(j.Anchor) {
			if rec.Anchor, err = readTime(j.Anchor, "/anchor"); err != nil {
				return err
			}
		}
	default:
		return invalid(SlugInvalidSchedule, "/cron", "no spec: give cron (a cron spec such as \"*/5 * * * *\" or @daily) or every (an interval such as 90s)")
	}
	return nil
}

// toRecurring reads j into the schedule id, which the queue checks
// (timerError names the field it refuses).
func toRecurring(id string, j scheduleSpecJSON) (queue.Recurring, error) {
	rec := queue.Recurring{ID: id}
	if err := readSpec(j, &rec); err != nil {
		return rec, err
	}
	p, err := readPayload(j.Payload, j.PayloadText, "")
	if err != nil {
		return rec, err
	}
	rec.Payload = p
	if j.CatchUp != nil {
		switch c := queue.CatchUp(*j.CatchUp); c {
		case queue.CatchUpOnce, queue.CatchUpSkip, queue.CatchUpAll:
			rec.CatchUp = c
		default:
			return rec, badRequest("/catch_up", "catch_up %q is not once, skip or all", *j.CatchUp)
		}
	}
	if j.Overlap != nil {
		switch o := queue.Overlap(*j.Overlap); o {
		case queue.OverlapAllow, queue.OverlapSkip:
			rec.Overlap = o
		default:
			return rec, badRequest("/overlap", "overlap %q is not allow or skip", *j.Overlap)
		}
	}
	setGiven(&rec.CatchUpLimit, j.CatchUpLimit)
	if j.Jitter != nil {
		if rec.Jitter, err = readDelay(*j.Jitter, "/jitter"); err != nil {
			return rec, err
		}
	}
	if given(j.End) {
		if rec.End, err = readTime(j.End, "/end"); err != nil {
			return rec, err
		}
	}
	setGiven(&rec.MaxCount, j.MaxCount)
	setGiven(&rec.Ahead, j.Ahead)
	if rec.Endpoint, rec.URL, err = readDeliver(j.Deliver, ""); err != nil {
		return rec, err
	}
	if rec.FlowKey, err = readFlowKey(j.FlowKey, ""); err != nil {
		return rec, err
	}
	if rec.Owner, err = readOwner(j.Owner, ""); err != nil {
		return rec, err
	}
	rec.Labels = j.Labels
	return rec, nil
}

// ScheduleJSON is a recurring schedule as the API returns it: the shape of
// `timerctl schedules get -o json`.
type ScheduleJSON struct {
	ID           string            `json:"id"`
	Cron         string            `json:"cron,omitempty"`
	TZ           string            `json:"tz,omitempty"`
	Every        string            `json:"every,omitempty"`
	Anchor       *string           `json:"anchor,omitempty"`
	State        string            `json:"state"`
	Version      int64             `json:"version"`
	Payload      []byte            `json:"payload"`
	CatchUp      string            `json:"catch_up"`
	CatchUpLimit int               `json:"catch_up_limit"`
	Jitter       string            `json:"jitter"`
	End          *string           `json:"end"`
	MaxCount     int64             `json:"max_count"`
	Ahead        int               `json:"ahead"`
	Overlap      string            `json:"overlap"`
	Deliver      *DeliverJSON      `json:"deliver,omitempty"`
	FlowKey      string            `json:"flow_key,omitempty"`
	Owner        string            `json:"owner,omitempty"`
	Labels       map[string]string `json:"labels,omitempty"`
	Count        int64             `json:"count"`
	Last         *string           `json:"last"`
	Pending      []OccurrenceJSON  `json:"pending"`
	Next         []string          `json:"next"`
	CreatedAt    string            `json:"created_at"`
	UpdatedAt    string            `json:"updated_at"`
	// Created is set only in answers to creates.
	Created *bool `json:"created,omitempty"`
}

// OccurrenceJSON is one armed occurrence of a schedule.
type OccurrenceJSON struct {
	ID      string `json:"id"`
	Nominal string `json:"nominal"`
	DueAt   string `json:"due_at"`
}

// ToScheduleJSON is in as the API and `timerctl schedules get -o json`
// show it, without Created; the export lines of timerctl are this shape
// less its derived fields.
func ToScheduleJSON(in queue.RecurringInfo) ScheduleJSON {
	j := ScheduleJSON{ID: in.ID, Cron: in.Spec, State: string(in.State), Version: in.Version, Payload: WireBytes(in.Payload),
		CatchUp: string(cmp.Or(in.CatchUp, queue.CatchUpOnce)), CatchUpLimit: in.CatchUpLimit, Jitter: in.Jitter.String(),
		End: optTime(in.End), MaxCount: in.MaxCount, Ahead: in.Ahead, Overlap: string(cmp.Or(in.Overlap, queue.OverlapAllow)),
		Count: in.Count, Pending: []OccurrenceJSON{}, Next: []string{}, FlowKey: in.FlowKey, Owner: in.Owner, Labels: in.Labels,
		CreatedAt: timefmt.Format(in.CreatedAt), UpdatedAt: timefmt.Format(in.UpdatedAt), Last: optTime(in.Last)}
	if in.Spec != "" && in.Location != nil {
		j.TZ = in.Location.String()
	}
	if in.Every > 0 {
		j.Every, j.Anchor = in.Every.String(), optTime(in.Anchor)
	}
	if in.Endpoint != "" {
		ep := in.Endpoint
		j.Deliver = &DeliverJSON{Endpoint: &ep}
		if in.URL != "" {
			u := in.URL
			j.Deliver.URL = &u
		}
	}
	for _, o := range in.Pending {
		j.Pending = append(j.Pending, OccurrenceJSON{ID: o.ID, Nominal: timefmt.Format(o.Nominal), DueAt: timefmt.Format(o.Due)})
	}
	for _, t := range in.Next {
		j.Next = append(j.Next, timefmt.Format(t))
	}
	return j
}

// scheduleRequest is the body of POST .../schedules (its id in the
// body) and of PUT .../schedules/{id}.
type scheduleRequest struct {
	rec queue.Recurring
	f   fields
}

func (req *scheduleRequest) read(h *Handler, w http.ResponseWriter, r *http.Request) error {
	var j newScheduleJSON
	if id := r.PathValue("id"); id != "" {
		j.ID, req.f.pathID = &id, true
		if err := h.decode(w, r, &j.scheduleSpecJSON, false); err != nil {
			return err
		}
	} else if err := h.decode(w, r, &j, false); err != nil {
		return err
	}
	if j.ID == nil {
		return badRequest("/id", "the schedule has no id; give one, 1-%d bytes of UTF-8", queue.MaxRecurringIDBytes)
	}
	var err error
	req.rec, err = toRecurring(*j.ID, j.scheduleSpecJSON)
	req.f.text = []bool{j.PayloadText != nil}
	return err
}

func createSchedule(ctx context.Context, q *queue.Queue, req *scheduleRequest) (any, error) {
	info, created, err := q.Recurring().Put(ctx, req.rec)
	if err != nil {
		return nil, req.refused(err)
	}
	out := ToScheduleJSON(info)
	out.Created = &created
	return createdReply(created, out), nil
}

func updateSchedule(ctx context.Context, q *queue.Queue, req *scheduleRequest) (any, error) {
	info, err := q.Recurring().Update(ctx, req.rec)
	if err != nil {
		return nil, req.refused(err)
	}
	return ToScheduleJSON(info), nil
}

// refused names the field a refusal of the schedule is about, as
// timerError does for a timer delivering where the schedule does.
func (req *scheduleRequest) refused(err error) error {
	return timerError(err, []queue.NewTimer{{Endpoint: req.rec.Endpoint, URL: req.rec.URL}}, req.f)
}

// scheduleCall is a route that runs one call on the schedule of its path
// and answers the schedule.
func scheduleCall(call func(r queue.RecurringTimers, ctx context.Context, id string) (queue.RecurringInfo, error)) func(context.Context, *queue.Queue, *pathID) (any, error) {
	return func(ctx context.Context, q *queue.Queue, req *pathID) (any, error) {
		info, err := call(q.Recurring(), ctx, req.id)
		if err != nil {
			return nil, err
		}
		return ToScheduleJSON(info), nil
	}
}

func deleteSchedule(ctx context.Context, q *queue.Queue, req *pathID) (any, error) {
	return noContent, q.Recurring().Delete(ctx, req.id)
}

type schedulePageJSON struct {
	Schedules  []ScheduleJSON `json:"schedules"`
	NextCursor string         `json:"next_cursor"`
}

// pageRequest is the query of a paged list: limit and cursor.
type pageRequest struct {
	limit  int
	cursor string
}

func (req *pageRequest) read(_ *Handler, _ http.ResponseWriter, r *http.Request) error {
	v, err := query(r, "limit", "cursor")
	if err != nil {
		return err
	}
	req.cursor = v.Get("cursor")
	req.limit, err = queryLimit(v)
	return err
}

func listSchedules(ctx context.Context, q *queue.Queue, req *pageRequest) (any, error) {
	page, err := q.Recurring().List(ctx, queue.RecurringListOptions{Limit: req.limit, Cursor: req.cursor})
	if err != nil {
		return nil, err
	}
	return schedulePageJSON{Schedules: mapList(page.Schedules, ToScheduleJSON), NextCursor: page.NextCursor}, nil
}
