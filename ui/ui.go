// Package ui is timerq's web dashboard: an http.Handler that shows a
// namespace's counts (per shard), backlog, due-time histogram, fire rate
// and lateness, its timers, its recurring schedules with their next, armed
// and recent occurrences, a live tail of the fire stream, the consumer
// groups and the dead-letter stream, and, when writes are allowed, cancels,
// reschedules and fires timers, pauses, resumes and deletes schedules, and
// requeues dead letters.
//
// Mount it in an application's own mux under a prefix:
//
//	h, err := ui.New(q, ui.Options{Prefix: "/timerq"})
//	mux.Handle("/timerq/", h)
//
// The zero Options are read-only: every action is hidden and every POST is
// refused. Set AllowWrites to enable them. Pages are rendered on the server
// with html/template; the one script, for the live tail, is embedded, so
// the dashboard works offline and under a strict Content-Security-Policy.
//
// The handler does not authenticate: put it behind the application's own
// auth, as `timerctl ui` does. It protects its POSTs against cross-site
// request forgery itself, with a signed token in every form.
package ui

import (
	"cmp"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/timerq/timerq/queue"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// DefaultTimeout bounds each page's Redis calls when Options.Timeout is 0.
const DefaultTimeout = 5 * time.Second

// Options configures a Handler. The zero value serves a read-only dashboard
// at the root.
type Options struct {
	// Prefix is the path the handler is mounted under, such as "/timerq",
	// without a trailing slash; every link and form uses it. Mount the
	// handler for Prefix+"/". Empty means the root.
	Prefix string

	// AllowWrites shows and accepts cancel, reschedule, fire-now, requeue,
	// and pause, resume and delete of schedules. False (the default) hides
	// them and refuses every POST with 403, whatever the request carries.
	AllowWrites bool

	// Timeout bounds the Redis calls of one page. 0 means DefaultTimeout.
	Timeout time.Duration

	// Logger receives failed Redis calls; nil discards them.
	Logger *slog.Logger
}

// Handler serves the dashboard. Create it with New.
type Handler struct {
	q      *queue.Queue
	opts   Options
	mux    *http.ServeMux
	pages  map[string]*template.Template
	secret []byte // signs CSRF tokens; per process, so a restart logs no one out but voids open forms
	xorig  *http.CrossOriginProtection
	log    *slog.Logger
}

// New returns a dashboard of q.
func New(q *queue.Queue, opts Options) (*Handler, error) {
	if q == nil {
		return nil, fmt.Errorf("%w: ui.New needs a queue", queue.ErrInvalidOptions)
	}
	if opts.Prefix != "" && (!strings.HasPrefix(opts.Prefix, "/") || strings.HasSuffix(opts.Prefix, "/")) {
		return nil, fmt.Errorf("%w: Prefix %q must start with / and not end with one, like /timerq", queue.ErrInvalidOptions, opts.Prefix)
	}
	if opts.Timeout < 0 {
		return nil, fmt.Errorf("%w: Timeout %v is negative; use 0 for the default", queue.ErrInvalidOptions, opts.Timeout)
	}
	opts.Timeout = cmp.Or(opts.Timeout, DefaultTimeout)
	h := &Handler{q: q, opts: opts, xorig: http.NewCrossOriginProtection(), log: opts.Logger}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	h.secret = make([]byte, 32)
	if _, err := rand.Read(h.secret); err != nil {
		return nil, err
	}
	if err := h.parseTemplates(); err != nil {
		return nil, err
	}
	static, _ := fs.Sub(staticFS, "static")
	p := opts.Prefix
	mux := http.NewServeMux()
	mux.Handle("GET "+p+"/static/", http.StripPrefix(p+"/static/", http.FileServerFS(static)))
	mux.HandleFunc("GET "+p+"/{$}", h.overview)
	mux.HandleFunc("GET "+p+"/timers", h.timers)
	mux.HandleFunc("GET "+p+"/timer", h.timer)
	mux.HandleFunc("GET "+p+"/timer/confirm", h.writeOnly(h.confirmTimer))
	mux.HandleFunc("POST "+p+"/timer/{action}", h.post(h.actTimer))
	mux.HandleFunc("GET "+p+"/tail", h.tail)
	mux.HandleFunc("GET "+p+"/tail/events", h.tailEvents)
	mux.HandleFunc("GET "+p+"/groups", h.groups)
	mux.HandleFunc("GET "+p+"/dead/confirm", h.writeOnly(h.confirmRequeue))
	mux.HandleFunc("POST "+p+"/dead/requeue", h.post(h.requeue))
	mux.HandleFunc("GET "+p+"/schedules", h.schedules)
	mux.HandleFunc("GET "+p+"/quarantine", h.quarantine)
	mux.HandleFunc("GET "+p+"/schedule", h.schedule)
	mux.HandleFunc("GET "+p+"/schedule/confirm", h.writeOnly(h.confirmSchedule))
	mux.HandleFunc("POST "+p+"/schedule/{action}", h.post(h.actSchedule))
	if p != "" {
		mux.Handle("GET "+p, http.RedirectHandler(p+"/", http.StatusMovedPermanently))
	}
	h.mux = mux
	return h, nil
}

// ServeHTTP serves the dashboard, setting the security headers on every
// response.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	// No inline script or style anywhere: only the embedded files run.
	hd.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "+
		"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("X-Frame-Options", "DENY")
	hd.Set("Referrer-Policy", "no-referrer")
	hd.Set("Cache-Control", "no-store")
	h.mux.ServeHTTP(w, r)
}

// csrfCookie holds a random nonce; a form's token is the nonce's HMAC under
// the handler's secret, so a cookie planted by a sibling subdomain is of no
// use without the secret, and a token without the cookie is of no use
// either.
const csrfCookie = "timerq_csrf"

// csrfToken returns the form token of the request's session, setting the
// nonce cookie first if the browser has none.
func (h *Handler) csrfToken(w http.ResponseWriter, r *http.Request) string {
	nonce := ""
	if c, err := r.Cookie(csrfCookie); err == nil && len(c.Value) == 32 {
		nonce = c.Value
	} else {
		var b [16]byte
		_, _ = rand.Read(b[:])
		nonce = hex.EncodeToString(b[:])
		http.SetCookie(w, &http.Cookie{
			Name: csrfCookie, Value: nonce, Path: h.opts.Prefix + "/",
			HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil,
		})
	}
	return h.sign(nonce)
}

func (h *Handler) sign(nonce string) string {
	m := hmac.New(sha256.New, h.secret)
	m.Write([]byte(nonce))
	return hex.EncodeToString(m.Sum(nil))
}

// errForbidden explains a refused POST.
var errForbidden = errors.New("forbidden")

// checkPost refuses a POST in read-only mode, from another origin, or
// without a valid CSRF token.
func (h *Handler) checkPost(r *http.Request) (int, string) {
	if !h.opts.AllowWrites {
		return http.StatusForbidden, "this dashboard is read-only: actions are disabled"
	}
	if err := h.xorig.Check(r); err != nil {
		return http.StatusForbidden, "cross-origin request refused"
	}
	if err := r.ParseForm(); err != nil {
		return http.StatusBadRequest, "unreadable form: " + err.Error()
	}
	c, err := r.Cookie(csrfCookie)
	if err != nil {
		return http.StatusForbidden, "missing CSRF cookie: reload the page and try again"
	}
	want := h.sign(c.Value)
	if subtle.ConstantTimeCompare([]byte(r.PostForm.Get("csrf")), []byte(want)) != 1 {
		return http.StatusForbidden, "invalid CSRF token: reload the page and try again"
	}
	return 0, ""
}

// post wraps a POST handler with checkPost.
func (h *Handler) post(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
		if code, why := h.checkPost(r); code != 0 {
			h.fail(w, r, code, fmt.Errorf("%w: %s", errForbidden, why))
			return
		}
		next(w, r)
	}
}

// writeOnly refuses pages that lead to an action in read-only mode.
func (h *Handler) writeOnly(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !h.opts.AllowWrites {
			h.fail(w, r, http.StatusForbidden, fmt.Errorf("%w: this dashboard is read-only: actions are disabled", errForbidden))
			return
		}
		next(w, r)
	}
}
