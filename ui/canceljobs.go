package ui

// The bulk cancel pages: the namespace's jobs, one job, and starting one
// by ID prefix through a confirmation.

import (
	"context"
	"net/http"
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

// confirmCancelJob asks before a bulk cancel; a filter the library
// refuses (an empty prefix) is refused here with its error.
func (h *Handler) confirmCancelJob(w http.ResponseWriter, r *http.Request) {
	f := queue.CancelFilter{IDPrefix: r.URL.Query().Get("prefix")}
	if h.failed(w, r, f.Validate()) {
		return
	}
	h.render(w, r, http.StatusOK, "confirm", "Confirm", confirmData{
		Action: "cancel them", Subject: "ID prefix", ID: f.IDPrefix, Prefix: f.IDPrefix,
		Question: "Cancel every scheduled timer whose ID starts with this prefix, on every shard? They never fire, and their waiters get ErrCancelled; timers that fired already stay fired.",
		Post:     h.link("/cancel-jobs/start"), Back: h.link("/cancel-jobs"),
	})
}

// startCancelJob runs queue.CancelMatching and shows the job it ran: done,
// or running in the workers when it was too large for the request.
func (h *Handler) startCancelJob(ctx context.Context, w http.ResponseWriter, r *http.Request) {
	j, err := h.q.CancelMatching(ctx, queue.CancelFilter{IDPrefix: r.PostForm.Get("prefix")})
	if h.failed(w, r, err) {
		return
	}
	h.log.Info("timerq ui: bulk cancel", "prefix", j.Filter.IDPrefix, "job", j.ID, "state", j.State,
		"cancelled", j.Counts.Cancelled, "namespace", h.q.Namespace())
	http.Redirect(w, r, h.link("/cancel-job", "id", j.ID, "done", "bulk-cancelled"), http.StatusSeeOther)
}
