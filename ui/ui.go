// Package ui is timerq's web dashboard: an http.Handler that shows a
// namespace's counts (per shard), backlog, due-time histogram, fire rate
// and lateness, its timers, its recurring schedules with their next, armed
// and recent occurrences, a live tail of the fire stream, the consumer
// groups and the dead-letter stream, the endpoints fires are delivered to
// with each delivering timer's attempt log and the dead-lettered
// deliveries, and the bulk cancel jobs, and, when writes are allowed,
// cancels, reschedules and fires timers, cancels timers by ID prefix,
// pauses, resumes and deletes schedules, requeues dead letters and
// redrives dead-lettered deliveries.
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
	"context"
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
	"path"
	"strings"
	"time"

	"github.com/timerq/timerq/internal/httpstream"
	"github.com/timerq/timerq/queue"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// DefaultTimeout bounds each page's Redis calls when Options.Timeout is 0.
const DefaultTimeout = 5 * time.Second

// The live tail's defaults, when the Options leave them 0.
const (
	DefaultMaxTails          = 100
	DefaultMaxTailsPerClient = 10
	DefaultTailWriteTimeout  = 30 * time.Second
)

// Options configures a Handler. The zero value serves a read-only dashboard
// at the root.
type Options struct {
	// Prefix is the path the handler is mounted under, such as "/timerq",
	// without a trailing slash; every link and form uses it. Mount the
	// handler for Prefix+"/". Empty means the root.
	Prefix string

	// AllowWrites shows and accepts cancel, bulk cancel by ID prefix,
	// reschedule, fire-now, requeue, redrive of dead-lettered deliveries,
	// enable and disable of endpoints, and pause, resume and delete of
	// schedules. False (the default) hides
	// them and refuses every POST with 403, whatever the request carries.
	AllowWrites bool

	// DeliveryGroup is the consumer group of the namespace's dispatchers
	// (timerworker --deliver-group): the endpoints page shows its pending
	// deliveries, and its dead letters are the dead-lettered deliveries.
	// "" means queue.DefaultDeliveryGroup (dispatch.DefaultGroup).
	DeliveryGroup string

	// Timeout bounds the Redis calls of one page. 0 means DefaultTimeout.
	Timeout time.Duration

	// Logger receives failed Redis calls; nil discards them.
	Logger *slog.Logger

	// MaxTails caps the live tails open at once over all clients, and
	// MaxTailsPerClient those of one client, by remote IP address (behind
	// a reverse proxy, every user is the proxy's one client). A tail
	// beyond either cap is refused with 503 and Retry-After. 0 means
	// DefaultMaxTails and DefaultMaxTailsPerClient.
	//
	// A tail holds no Redis connection: it polls the fire streams with
	// non-blocking reads, about twice a second, so the pages keep the
	// pool however many tails are open.
	MaxTails, MaxTailsPerClient int

	// MaxTailsSetting and MaxTailsPerClientSetting name, in a refused
	// tail's message, what raises each cap: `timerctl ui` gives its flags.
	// Empty means the names of the options above.
	MaxTailsSetting, MaxTailsPerClientSetting string

	// TailWriteTimeout bounds each write of a live tail, so a client that
	// stops reading is cut off; it replaces the server's WriteTimeout for
	// a tail, whose life is not bounded. 0 means DefaultTailWriteTimeout.
	TailWriteTimeout time.Duration
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
	tails  *httpstream.Limiter
}

// New returns a dashboard of q.
func New(q *queue.Queue, opts Options) (*Handler, error) {
	if q == nil {
		return nil, fmt.Errorf("%w: ui.New needs a queue", queue.ErrInvalidOptions)
	}
	if opts.Prefix != "" && (!strings.HasPrefix(opts.Prefix, "/") || strings.HasSuffix(opts.Prefix, "/")) {
		return nil, fmt.Errorf("%w: Prefix %q must start with / and not end with one, like /timerq", queue.ErrInvalidOptions, opts.Prefix)
	}
	if opts.DeliveryGroup != "" {
		if err := queue.ValidateConsumerName("DeliveryGroup", opts.DeliveryGroup); err != nil {
			return nil, err // wraps ErrInvalidOptions
		}
	}
	if opts.Timeout < 0 {
		return nil, fmt.Errorf("%w: Timeout %v is negative; use 0 for the default", queue.ErrInvalidOptions, opts.Timeout)
	}
	if opts.MaxTails < 0 || opts.MaxTailsPerClient < 0 || opts.TailWriteTimeout < 0 {
		return nil, fmt.Errorf("%w: MaxTails %d, MaxTailsPerClient %d and TailWriteTimeout %v must not be negative; use 0 for the defaults",
			queue.ErrInvalidOptions, opts.MaxTails, opts.MaxTailsPerClient, opts.TailWriteTimeout)
	}
	opts.DeliveryGroup = cmp.Or(opts.DeliveryGroup, queue.DefaultDeliveryGroup)
	opts.Timeout = cmp.Or(opts.Timeout, DefaultTimeout)
	opts.MaxTails = cmp.Or(opts.MaxTails, DefaultMaxTails)
	opts.MaxTailsPerClient = cmp.Or(opts.MaxTailsPerClient, DefaultMaxTailsPerClient)
	opts.MaxTailsSetting = cmp.Or(opts.MaxTailsSetting, "ui.Options.MaxTails")
	opts.MaxTailsPerClientSetting = cmp.Or(opts.MaxTailsPerClientSetting, "ui.Options.MaxTailsPerClient")
	opts.TailWriteTimeout = cmp.Or(opts.TailWriteTimeout, DefaultTailWriteTimeout)
	tails, err := httpstream.NewLimiter(httpstream.Limits{
		What: "live tails", Total: opts.MaxTails, PerClient: opts.MaxTailsPerClient,
		TotalSetting: opts.MaxTailsSetting, PerClientSetting: opts.MaxTailsPerClientSetting,
	})
	if err != nil {
		return nil, err
	}
	h := &Handler{q: q, opts: opts, xorig: http.NewCrossOriginProtection(), log: opts.Logger, tails: tails}
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
	mux.Handle("GET "+p+"/static/", http.StripPrefix(p+"/static/", h.files(static)))
	mux.HandleFunc("GET "+p+"/{$}", h.timed(h.overview))
	mux.HandleFunc("GET "+p+"/timers", h.timed(h.timers))
	mux.HandleFunc("GET "+p+"/timer", h.timed(h.timer))
	mux.HandleFunc("GET "+p+"/timer/confirm", h.writeOnly(h.confirmTimer))
	mux.HandleFunc("POST "+p+"/timer/{action}", h.post(h.timed(h.actTimer)))
	mux.HandleFunc("GET "+p+"/tail", h.timed(h.tail))
	mux.HandleFunc("GET "+p+"/tail/events", h.tailEvents)
	mux.HandleFunc("GET "+p+"/groups", h.timed(h.groups))
	mux.HandleFunc("GET "+p+"/dead/confirm", h.writeOnly(h.confirmRequeue))
	mux.HandleFunc("POST "+p+"/dead/requeue", h.post(h.timed(h.requeue)))
	mux.HandleFunc("GET "+p+"/endpoints", h.timed(h.endpoints))
	mux.HandleFunc("GET "+p+"/endpoints/confirm", h.writeOnly(h.confirmEndpoint))
	mux.HandleFunc("POST "+p+"/endpoints/{action}", h.post(h.timed(h.actEndpoint)))
	mux.HandleFunc("GET "+p+"/deliveries", h.timed(h.deliveries))
	mux.HandleFunc("GET "+p+"/deliveries/confirm", h.writeOnly(h.confirmRedrive))
	mux.HandleFunc("POST "+p+"/deliveries/redrive", h.post(h.timed(h.redrive)))
	mux.HandleFunc("GET "+p+"/schedules", h.timed(h.schedules))
	mux.HandleFunc("GET "+p+"/quarantine", h.timed(h.quarantine))
	mux.HandleFunc("GET "+p+"/flows", h.timed(h.flows))
	mux.HandleFunc("GET "+p+"/cancel-jobs", h.timed(h.cancelJobs))
	mux.HandleFunc("GET "+p+"/cancel-job", h.timed(h.cancelJob))
	mux.HandleFunc("GET "+p+"/cancel-jobs/confirm", h.writeOnly(h.confirmCancelJob))
	mux.HandleFunc("POST "+p+"/cancel-jobs/start", h.post(h.timed(h.startCancelJob)))
	mux.HandleFunc("GET "+p+"/schedule", h.timed(h.schedule))
	mux.HandleFunc("GET "+p+"/schedule/confirm", h.writeOnly(h.confirmSchedule))
	mux.HandleFunc("POST "+p+"/schedule/{action}", h.post(h.timed(h.actSchedule)))
	if p != "" {
		mux.Handle("GET "+p, http.RedirectHandler(p+"/", http.StatusMovedPermanently))
	}
	h.mux = mux
	return h, nil
}

// page is a dashboard handler whose Redis calls share ctx: the request's
// context bounded by Options.Timeout (Handler.timed).
type page func(ctx context.Context, w http.ResponseWriter, r *http.Request)

// timed serves p, under the deadline of its Redis calls.
func (h *Handler) timed(p page) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := h.ctx(r)
		defer cancel()
		p(ctx, w, r)
	}
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

// files serves the embedded static files, and 404 for a directory: a
// listing shows nothing a page links to.
func (h *Handler) files(fsys fs.FS) http.Handler {
	srv := http.FileServerFS(fsys)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := strings.TrimPrefix(path.Clean("/"+r.URL.Path), "/")
		if name == "" {
			name = "."
		}
		if st, err := fs.Stat(fsys, name); err == nil && st.IsDir() || strings.HasSuffix(r.URL.Path, "/") {
			h.fail(w, r, http.StatusNotFound, fmt.Errorf("no static file %q: only the files the pages link to are served", r.URL.Path))
			return
		}
		srv.ServeHTTP(w, r)
	})
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

// The kinds of refused POST, which begin the error page's text.
var (
	errForbidden  = errors.New("forbidden")
	errBadRequest = errors.New("bad request")       // the form cannot be read
	errTooLarge   = errors.New("request too large") // the body exceeds maxForm
)

// errReadOnly refuses an action of a read-only dashboard.
var errReadOnly = fmt.Errorf("%w: this dashboard is read-only: actions are disabled", errForbidden)

// checkPost refuses a POST in read-only mode, from another origin, or
// without a valid CSRF token, with the status to answer.
func (h *Handler) checkPost(r *http.Request) (int, error) {
	forbidden := func(why string) (int, error) { return http.StatusForbidden, fmt.Errorf("%w: %s", errForbidden, why) }
	if !h.opts.AllowWrites {
		return http.StatusForbidden, errReadOnly
	}
	if err := h.xorig.Check(r); err != nil {
		return forbidden("cross-origin request refused")
	}
	if err := r.ParseForm(); err != nil {
		if tooBig := (*http.MaxBytesError)(nil); errors.As(err, &tooBig) {
			return http.StatusRequestEntityTooLarge, fmt.Errorf("%w: the form is larger than %d KiB, more than any of the dashboard's forms sends", errTooLarge, tooBig.Limit>>10)
		}
		return http.StatusBadRequest, fmt.Errorf("%w: unreadable form: %v", errBadRequest, err)
	}
	c, err := r.Cookie(csrfCookie)
	if err != nil {
		return forbidden("missing CSRF cookie: reload the page and try again")
	}
	want := h.sign(c.Value)
	if subtle.ConstantTimeCompare([]byte(r.PostForm.Get("csrf")), []byte(want)) != 1 {
		return forbidden("invalid CSRF token: reload the page and try again")
	}
	return 0, nil
}

// maxForm bounds a POST's body: the largest form, a reschedule, is a few
// hundred bytes.
const maxForm = 64 << 10

// post wraps a POST handler with checkPost.
func (h *Handler) post(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, maxForm)
		if code, err := h.checkPost(r); err != nil {
			h.fail(w, r, code, err)
			return
		}
		next(w, r)
	}
}

// writeOnly refuses pages that lead to an action in read-only mode.
func (h *Handler) writeOnly(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !h.opts.AllowWrites {
			h.fail(w, r, http.StatusForbidden, errReadOnly)
			return
		}
		next(w, r)
	}
}
