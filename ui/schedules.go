package ui

import (
	"context"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/timerq/timerq/queue"
)

// This file is the recurring schedules' part of the dashboard: a list of
// the namespace's schedules, one schedule with its next occurrences, its
// armed and recent ones, and pause, resume and delete.

const (
	// recentCandidates is how many of a schedule's latest nominal times
	// (by its current spec, up to its last armed one) the schedule page
	// looks up as timers, one O(1) read each; recentShown is how many of
	// those found it shows.
	recentCandidates = 30
	recentShown      = 10
	// recentSteps bounds the spec evaluations spent finding them.
	recentSteps = 200_000
)

// policy is one of a schedule's policies, by its field name in
// queue.Recurring.
type policy struct {
	Name, Value string
	Set         bool // not the field's zero value
}

// specFields are the fields of queue.Recurring shown in their own rows;
// every other field is a policy, shown by name whatever it is, so a field
// added to Recurring appears without a change here.
var specFields = map[string]bool{"ID": true, "Spec": true, "Location": true, "Every": true, "Anchor": true, "Payload": true}

// zeroMeans says what a policy's zero value means, for the fields that
// have one worth saying.
var zeroMeans = map[string]string{"Jitter": "none", "End": "none", "MaxCount": "no limit"}

// policies lists r's policies in field order.
func policies(r queue.Recurring) []policy {
	v := reflect.ValueOf(r)
	var out []policy
	for i := range v.NumField() {
		f := v.Type().Field(i)
		if !f.IsExported() || specFields[f.Name] {
			continue
		}
		fv := v.Field(i)
		p := policy{Name: fieldLabel(f.Name), Set: !fv.IsZero()}
		switch x := fv.Interface().(type) {
		case time.Duration:
			p.Value = x.String()
		case time.Time:
			p.Value = formatTime(x)
		case fmt.Stringer:
			p.Value = x.String()
		default:
			p.Value = fmt.Sprint(x)
		}
		if !p.Set {
			if z, ok := zeroMeans[f.Name]; ok {
				p.Value = z
			} else if p.Value == "" {
				p.Value = "—"
			}
		}
		out = append(out, p)
	}
	return out
}

// fieldLabel writes a field name as words: CatchUpLimit is "catch-up
// limit", MaxCount "max count".
func fieldLabel(name string) string {
	var b strings.Builder
	for i, r := range name {
		if i > 0 && unicode.IsUpper(r) {
			b.WriteByte(' ')
		}
		b.WriteRune(unicode.ToLower(r))
	}
	return strings.Replace(b.String(), "catch up", "catch-up", 1)
}

// defaultPolicy are the values the list leaves out as defaults.
var defaultPolicy = map[string]string{
	"catch-up":       string(queue.CatchUpOnce),
	"catch-up limit": fmt.Sprint(queue.DefaultCatchUpLimit),
	"ahead":          fmt.Sprint(queue.DefaultAhead),
}

// policySummary is the policies that are set and not the default, in one
// line, for the list; the catch-up limit shows with catch-up all only.
func policySummary(ps []policy) string {
	var parts []string
	all := false
	for _, p := range ps {
		all = all || p.Name == "catch-up" && p.Value == string(queue.CatchUpAll)
	}
	for _, p := range ps {
		if p.Name == "catch-up limit" {
			if all { // it matters only then, default or not
				parts = append(parts, p.Name+" "+p.Value)
			}
			continue
		}
		if !p.Set || defaultPolicy[p.Name] == p.Value {
			continue
		}
		parts = append(parts, p.Name+" "+p.Value)
	}
	if len(parts) == 0 {
		return "defaults"
	}
	return strings.Join(parts, " · ")
}

// specView is how a schedule's spec and zone are shown.
func specView(in queue.RecurringInfo) (spec, zone string) {
	if in.Every > 0 {
		return "every " + in.Every.String(), "— (elapsed time)"
	}
	zone = "UTC"
	if in.Location != nil {
		zone = in.Location.String()
	}
	return in.Spec, zone
}

// scheduleRow is one schedule in the list.
type scheduleRow struct {
	ID, Spec, Zone, State string
	Policies              string
	NextDue               time.Time
	NextArmed             bool // NextDue is an armed occurrence's due time, not a nominal time from the spec
	Count                 int64
	Payload               string
}

type schedulesData struct {
	Now       time.Time
	Schedules []scheduleRow
	Next      string
	Problem   string
}

func (h *Handler) schedules(ctx context.Context, w http.ResponseWriter, r *http.Request) {
	d := schedulesData{Now: time.Now().UTC()}
	page, err := h.q.Recurring().List(ctx, queue.RecurringListOptions{Limit: listPage, Cursor: r.URL.Query().Get("cursor")})
	if err != nil {
		// Say why on the page itself: in a namespace of several shards
		// (until schedules are supported there), or with a bad cursor.
		d.Problem = err.Error()
		h.render(w, r, statusOf(err), "schedules", "Schedules", d)
		return
	}
	for _, in := range page.Schedules {
		if !in.Now.IsZero() {
			d.Now = in.Now
		}
		row := scheduleRow{ID: in.ID, State: string(in.State), Count: in.Count,
			Policies: policySummary(policies(in.Recurring)), Payload: payloadCell(in.Payload)}
		row.Spec, row.Zone = specView(in)
		switch {
		case len(in.Pending) > 0:
			row.NextDue, row.NextArmed = in.Pending[0].Due, true
		case len(in.Next) > 0:
			row.NextDue = in.Next[0]
		}
		d.Schedules = append(d.Schedules, row)
	}
	slices.SortFunc(d.Schedules, func(a, b scheduleRow) int { return strings.Compare(a.ID, b.ID) })
	if page.NextCursor != "" {
		d.Next = h.link("/schedules", "cursor", page.NextCursor)
	}
	h.render(w, r, http.StatusOK, "schedules", "Schedules", d)
}

// recentOccurrence is a past occurrence found as a timer.
type recentOccurrence struct {
	Nominal time.Time
	Timer   queue.Timer
}

type scheduleData struct {
	Info        queue.RecurringInfo
	Spec, Zone  string
	Policies    []policy
	PayloadText string
	Binary      bool
	Size        int
	Recent      []recentOccurrence
	Examined    int
}

func (h *Handler) schedule(ctx context.Context, w http.ResponseWriter, r *http.Request) {
	id := r.URL.Query().Get("id")
	in, err := h.q.Recurring().Get(ctx, id)
	if h.failed(w, r, err) {
		return
	}
	d := scheduleData{Info: in, Policies: policies(in.Recurring), Size: len(in.Payload)}
	d.Spec, d.Zone = specView(in)
	d.PayloadText, d.Binary = payloadText(in.Payload)

	// Past occurrences: the latest nominal times up to the last one armed,
	// read as timers. Skipped ones (catch-up, a pause) and purged ones are
	// not found and not shown.
	armed := map[string]bool{}
	for _, o := range in.Pending {
		armed[o.ID] = true
	}
	lower := in.CreatedAt.Add(-time.Millisecond)
	if ret := h.q.Options().Retention; ret > 0 && in.Now.Add(-ret).After(lower) {
		lower = in.Now.Add(-ret)
	}
	for _, t := range pastNominals(in.Recurring, lower, in.Last, recentCandidates) {
		oid := queue.OccurrenceID(in.ID, t)
		if armed[oid] {
			continue
		}
		d.Examined++
		tm, err := h.q.Get(ctx, oid)
		if err != nil {
			continue // skipped, purged, or unreadable: the record shows nothing to link
		}
		d.Recent = append(d.Recent, recentOccurrence{Nominal: t, Timer: tm})
		if len(d.Recent) == recentShown {
			break
		}
	}
	h.render(w, r, http.StatusOK, "schedule", in.ID, d)
}

// pastNominals returns up to n nominal times of r after lower and at or
// before last, newest first, by r's current spec.
func pastNominals(r queue.Recurring, lower, last time.Time, n int) []time.Time {
	if last.IsZero() || !last.After(lower) {
		return nil
	}
	var out []time.Time
	if r.Every > 0 {
		// anchor + k*Every, counted back from last.
		k := last.Sub(r.Anchor) / r.Every
		for ; k >= 0 && len(out) < n; k-- {
			t := r.Anchor.Add(k * r.Every)
			if !t.After(lower) {
				break
			}
			out = append(out, t.UTC())
		}
		return out
	}
	sch, err := r.Schedule()
	if err != nil {
		return nil
	}
	// A cron spec only goes forward: walk a window before last, widening
	// it until it holds n times or reaches lower.
	steps := 0
	for window, i := time.Minute, 0; ; window, i = window*4, i+1 {
		from := last.Add(-window)
		if !from.After(lower) || i == 12 { // 4^12 minutes is 32 years
			from = lower
		}
		var ring []time.Time
		for t := from; steps < recentSteps; steps++ {
			if t = sch.Next(t); t.IsZero() || t.After(last) {
				break
			}
			if ring = append(ring, t); len(ring) > n {
				ring = ring[1:]
			}
		}
		if len(ring) >= n || from.Equal(lower) || steps >= recentSteps {
			slices.Reverse(ring)
			for i := range ring {
				ring[i] = ring[i].UTC()
			}
			return ring
		}
	}
}

// scheduleActions are the confirmation questions of the schedule actions.
var scheduleActions = map[string]string{
	"pause":  "Pause this schedule? Its pending occurrences are cancelled, and nothing is armed until it is resumed.",
	"resume": "Resume this schedule? Occurrences that fell in the pause are skipped; the next ones are armed from now.",
	"delete": "Delete this schedule? Its pending occurrences are cancelled; fired ones stay until their retention passes. This cannot be undone.",
}

func (h *Handler) confirmSchedule(w http.ResponseWriter, r *http.Request) {
	qs := r.URL.Query()
	id, action := qs.Get("id"), qs.Get("action")
	if err := queue.ValidateID(id); err != nil {
		h.fail(w, r, http.StatusBadRequest, err)
		return
	}
	q, ok := scheduleActions[action]
	if !ok {
		h.fail(w, r, http.StatusNotFound, fmt.Errorf("no action %q: use pause, resume or delete", action))
		return
	}
	h.render(w, r, http.StatusOK, "confirm", "Confirm", confirmData{Action: action, Subject: "Schedule", ID: id,
		Question: q, Post: h.link("/schedule/" + action), Back: h.link("/schedule", "id", id)})
}

func (h *Handler) actSchedule(ctx context.Context, w http.ResponseWriter, r *http.Request) {
	id, action := r.PostForm.Get("id"), r.PathValue("action")
	var err error
	switch action {
	case "pause":
		_, err = h.q.Recurring().Pause(ctx, id)
	case "resume":
		_, err = h.q.Recurring().Resume(ctx, id)
	case "delete":
		err = h.q.Recurring().Delete(ctx, id)
	default:
		h.fail(w, r, http.StatusNotFound, fmt.Errorf("no action %q: use pause, resume or delete", action))
		return
	}
	if h.failed(w, r, err) {
		return
	}
	h.log.Info("timerq ui: schedule action", "action", action, "id", id, "namespace", h.q.Namespace())
	if action == "delete" {
		http.Redirect(w, r, h.link("/schedules", "done", "deleted"), http.StatusSeeOther)
		return
	}
	http.Redirect(w, r, h.link("/schedule", "id", id, "done", action+"d"), http.StatusSeeOther)
}
