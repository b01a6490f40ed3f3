package ui

// The bulk cancel pages: the namespace's jobs, one job, and starting one
// by ID prefix through a confirmation.

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/timerq/timerq/queue"
)

type cancelJobsData struct {
	Now  time.Time
	Jobs []queue.CancelJob
}

// cancelJobs lists the namespace's bulk cancel jobs still kept, newest
// first (queue.CancelJobs.List: at most 100), and, when writes are
// allowed, offers the form that starts one.
func (h *Handler) cancelJobs(ctx context.Context, w http.ResponseWriter, r *http.Request) {
	jobs, err := h.q.CancelJobs().List(ctx)
	if h.failed(w, r, err) {
		return
	}
	h.render(w, r, http.StatusOK, "canceljobs", "Cancel jobs", cancelJobsData{Now: time.Now().UTC(), Jobs: jobs})
}

type cancelJobData struct {
	Now time.Time
	Job queue.CancelJob
}

// cancelJob shows one bulk cancel job (queue.CancelJobs.Get), with its
// progress while it runs.
func (h *Handler) cancelJob(ctx context.Context, w http.ResponseWriter, r *http.Request) {
	j, err := h.q.CancelJobs().Get(ctx, r.URL.Query().Get("id"))
	if h.failed(w, r, err) {
		return
	}
	h.render(w, r, http.StatusOK, "canceljob", "Cancel job "+j.ID, cancelJobData{Now: time.Now().UTC(), Job: j})
}

// cancelFilter reads a bulk cancel's filter from a form or a query: its
// prefix, owner and labels (label=KEY=VALUE, repeatable; an empty one is
// the form's label field left empty), checked by the library.
func cancelFilter(v url.Values) (queue.CancelFilter, error) {
	f := queue.CancelFilter{IDPrefix: v.Get("prefix"), Owner: v.Get("owner")}
	for _, kv := range v["label"] {
		if kv == "" {
			continue
		}
		k, val, ok := strings.Cut(kv, "=")
		if !ok {
			return f, fmt.Errorf("%w: label %q is not KEY=VALUE, such as tenant=acme", queue.ErrInvalidFilter, kv)
		}
		if f.Labels == nil {
			f.Labels = map[string]string{}
		}
		f.Labels[k] = val
	}
	return f, f.Validate()
}

// labelList is labels as KEY=VALUE, in key order: the form's label values.
func labelList(labels map[string]string) []string {
	out := make([]string, 0, len(labels))
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		out = append(out, k+"="+labels[k])
	}
	return out
}

// confirmCancelJob asks before a bulk cancel; a filter the library
// refuses (an empty one) is refused here with its error.
func (h *Handler) confirmCancelJob(w http.ResponseWriter, r *http.Request) {
	f, err := cancelFilter(r.URL.Query())
	if h.failed(w, r, err) {
		return
	}
	d := confirmData{
		Action: "cancel them", Subject: "ID prefix", ID: f.IDPrefix, Prefix: f.IDPrefix, Owner: f.Owner, Labels: labelList(f.Labels),
		Question: "Cancel every scheduled timer whose ID starts with this prefix, on every shard? They never fire, and their waiters get ErrCancelled; timers that fired already stay fired.",
		Post:     h.link("/cancel-jobs/start"), Back: h.link("/cancel-jobs"),
	}
	if f.Owner != "" || len(f.Labels) > 0 {
		d.Subject, d.ID = "Filter", f.String()
		d.Question = "Cancel every scheduled timer this filter selects, on every shard? They never fire, and their waiters get ErrCancelled; timers that fired already stay fired."
	}
	h.render(w, r, http.StatusOK, "confirm", "Confirm", d)
}

// startCancelJob runs queue.CancelMatching and shows the job it ran: done,
// or running in the workers when it was too large for the request.
func (h *Handler) startCancelJob(ctx context.Context, w http.ResponseWriter, r *http.Request) {
	f, err := cancelFilter(r.PostForm)
	if h.failed(w, r, err) {
		return
	}
	j, err := h.q.CancelMatching(ctx, f)
	if h.failed(w, r, err) {
		return
	}
	h.log.Info("timerq ui: bulk cancel", "prefix", j.Filter.IDPrefix, "owner", j.Filter.Owner, "labels", labelList(j.Filter.Labels),
		"job", j.ID, "state", j.State, "cancelled", j.Counts.Cancelled, "namespace", h.q.Namespace())
	http.Redirect(w, r, h.link("/cancel-job", "id", j.ID, "done", "bulk-cancelled"), http.StatusSeeOther)
}
