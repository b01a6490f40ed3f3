package ui

import (
	"context"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"

	"github.com/timerq/timerq/queue"
	"github.com/timerq/timerq/schedule"
)

// pages are the templates, each rendered inside layout.html.
var pageNames = []string{"overview", "timers", "timer", "confirm", "tail", "groups", "schedules", "schedule", "quarantine", "endpoints", "deliveries", "flows", "canceljobs", "canceljob", "error"}

func (h *Handler) parseTemplates() error {
	funcs := template.FuncMap{
		"ts":      formatTime,
		"rel":     relTime,
		"dur":     formatDur,
		"link":    h.link,
		"num":     func(n int64) string { return groupDigits(n) },
		"sid":     streamTime,
		"payload": payloadCell,
		"labels":  formatLabels,
	}
	h.pages = map[string]*template.Template{}
	for _, name := range pageNames {
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/"+name+".html")
		if err != nil {
			return fmt.Errorf("ui: template %s: %w", name, err)
		}
		h.pages[name] = t
	}
	return nil
}

// view is what every page template gets; Data is the page's own.
type view struct {
	Title     string
	Nav       string
	Prefix    string
	Namespace string
	Writes    bool
	CSRF      string
	Notice    string
	Data      any
}

func (h *Handler) render(w http.ResponseWriter, r *http.Request, code int, name, title string, data any) {
	v := view{
		Title: title, Nav: name, Prefix: h.opts.Prefix, Namespace: h.q.Namespace(),
		Writes: h.opts.AllowWrites, Data: data, Notice: notices[r.URL.Query().Get("done")],
	}
	if h.opts.AllowWrites {
		v.CSRF = h.csrfToken(w, r)
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(code)
	if err := h.pages[name].Execute(w, v); err != nil {
		h.log.Error("timerq ui: rendering failed", "page", name, "err", err)
	}
}

// notices are the confirmations shown after an action redirects; the
// query names one, so no text from the URL reaches the page.
var notices = map[string]string{
	"cancelled":      "Timer cancelled.",
	"fired":          "Timer made due now: the next claim fires it.",
	"rescheduled":    "Timer rescheduled.",
	"requeued":       "Dead letter requeued to its group.",
	"enabled":        "Endpoint enabled: the dispatchers deliver to it again.",
	"disabled":       "Endpoint disabled: its fires wait until it is enabled again.",
	"redriven":       "Delivery redriven: the dispatchers deliver it again.",
	"redriven-all":   "The endpoint's dead-lettered deliveries are redriven: the dispatchers deliver them again.",
	"paused":         "Schedule paused: its pending occurrences are cancelled.",
	"resumed":        "Schedule resumed: its next occurrences are armed.",
	"deleted":        "Schedule deleted.",
	"bulk-cancelled": "Bulk cancel started: the job below is done, or, when it was too large for one request, running in the workers.",
}

// fail renders an error page; Redis errors are logged as well.
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, code int, err error) {
	if code >= 500 {
		h.log.Error("timerq ui: request failed", "path", r.URL.Path, "err", err)
	}
	h.render(w, r, code, "error", http.StatusText(code), err.Error())
}

// failed renders err's error page, with its status by statusOf, if err is
// not nil, and reports whether it did.
func (h *Handler) failed(w http.ResponseWriter, r *http.Request, err error) bool {
	if err != nil {
		h.fail(w, r, statusOf(err), err)
	}
	return err != nil
}

// statusOf maps queue errors to HTTP statuses.
func statusOf(err error) int {
	switch {
	case errors.Is(err, queue.ErrNotFound), errors.Is(err, queue.ErrDeadLetterNotFound), errors.Is(err, queue.ErrRecurringNotFound),
		errors.Is(err, queue.ErrEndpointNotFound), errors.Is(err, queue.ErrCancelJobNotFound):
		return http.StatusNotFound
	case errors.Is(err, queue.ErrAlreadyFired), errors.Is(err, queue.ErrCancelled):
		return http.StatusConflict
	case errors.Is(err, queue.ErrInvalidID), errors.Is(err, queue.ErrInvalidDue), errors.Is(err, queue.ErrInvalidOptions),
		errors.Is(err, schedule.ErrInvalidSchedule), errors.Is(err, queue.ErrInvalidEndpoint), errors.Is(err, queue.ErrInvalidFilter):
		return http.StatusBadRequest
	}
	return http.StatusBadGateway
}

func (h *Handler) ctx(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.Context(), h.opts.Timeout)
}

// link builds a URL under the prefix from a path and key, value pairs;
// empty values are left out.
func (h *Handler) link(path string, kv ...string) string {
	q := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] != "" {
			q.Set(kv[i], kv[i+1])
		}
	}
	u := h.opts.Prefix + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	return u
}
