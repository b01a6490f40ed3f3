package deliver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/textproto"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// Headers of a delivery request besides the configured ones. The three
// webhook-* headers are Standard Webhooks'; the timerq-* ones are ours.
const (
	HeaderID        = "webhook-id"        // MessageID: stable for one fire across attempts
	HeaderTimestamp = "webhook-timestamp" // this attempt's time, Unix seconds
	HeaderSignature = "webhook-signature" // "v1,<base64>" per active secret, space separated
	HeaderTimerID   = "timerq-timer-id"   // the timer's ID, percent-encoded (RFC 3986 path segment)
	HeaderDueAt     = "timerq-due-at"     // the timer's due time, RFC 3339 in UTC with milliseconds
	HeaderFiredAt   = "timerq-fired-at"   // when it fired, by the Redis server's clock, same form
	HeaderAttempt   = "timerq-attempt"    // this attempt's number, from 1
	HeaderTrace     = "traceparent"       // W3C trace context of the timer's schedule span, if traced
	HeaderOwner     = "timerq-owner"      // the timer's owner, percent-encoded (RFC 3986 path segment), if it has one
	HeaderEpoch     = "timerq-epoch"      // the owner's fencing epoch the timer was scheduled under, with timerq-owner
)

// reserved are the headers an endpoint's configured headers may not set.
var reserved = []string{HeaderID, HeaderTimestamp, HeaderSignature, HeaderTimerID, HeaderDueAt,
	HeaderFiredAt, HeaderAttempt, HeaderTrace, HeaderOwner, HeaderEpoch, "Host", "Content-Length", "Transfer-Encoding", "Connection"}

// Defaults and limits of Endpoint and Sender.
const (
	// DefaultTimeout is Endpoint.Timeout when it is 0.
	DefaultTimeout = 30 * time.Second
	// MaxTimeout is the longest Endpoint.Timeout.
	MaxTimeout = 5 * time.Minute
	// DefaultMaxBody is Sender.MaxBody when it is 0: how much of an
	// answer's body is read.
	DefaultMaxBody = 64 << 10
	// MaxErrorExcerpt is the longest Attempt.Error, in bytes.
	MaxErrorExcerpt = 256
	// MaxHeaders is the most configured headers an endpoint may have.
	MaxHeaders = 32
	// DefaultMaxInFlight is Endpoint.MaxInFlight when it is 0.
	DefaultMaxInFlight = 16
)

// ErrInvalidEndpoint means an endpoint's configuration is refused; the
// message says which field and why.
var ErrInvalidEndpoint = errors.New("timerq: deliver: invalid endpoint")

// Endpoint is what the delivery engine needs of an endpoint: storage (the
// queue's endpoint records) maps onto it.
type Endpoint struct {
	// Name names the endpoint in attempt logs and metrics.
	Name string
	// URL is where requests go: see ValidateURL.
	URL string
	// Headers are sent with every request. They may not set the
	// webhook-*, timerq-* or traceparent headers, nor Host,
	// Content-Length, Transfer-Encoding or Connection. Content-Type
	// defaults to application/json for a payload that is valid JSON and
	// application/octet-stream otherwise.
	Headers map[string]string
	// Timeout bounds one attempt, from dialling to the end of the
	// answer's body. 0 means DefaultTimeout (30 s); at most MaxTimeout.
	Timeout time.Duration
	// Policy is the retry policy.
	Policy Policy
	// MaxInFlight bounds the attempts to this endpoint under way at once
	// in one dispatcher. 0 means DefaultMaxInFlight.
	MaxInFlight int
	// Secrets are the active signing secrets: each request carries one
	// signature per secret (two during a rotation). None sends no
	// webhook-signature header.
	Secrets []Secret
	// Disabled endpoints receive nothing: a Dispatcher leaves their
	// fires pending until the endpoint is enabled. Send ignores it.
	Disabled bool
}

// Validate checks ep with the guard g (nil: the default guard) and
// returns an error wrapping ErrInvalidEndpoint, ErrInvalidURL, ErrRefused
// or ErrInvalidPolicy that names the field at fault.
func (ep Endpoint) Validate(g *Guard) error {
	if _, err := ValidateURL(ep.URL, g); err != nil {
		return fmt.Errorf("endpoint %q url: %w", ep.Name, err)
	}
	if ep.Timeout < 0 || ep.Timeout > MaxTimeout {
		return fmt.Errorf("%w: %q: timeout %v is outside 0..%v (0 means %v)", ErrInvalidEndpoint, ep.Name, ep.Timeout, MaxTimeout, DefaultTimeout)
	}
	if ep.MaxInFlight < 0 {
		return fmt.Errorf("%w: %q: max in flight %d is negative; use 0 for %d", ErrInvalidEndpoint, ep.Name, ep.MaxInFlight, DefaultMaxInFlight)
	}
	if _, err := ep.Policy.WithDefaults(); err != nil {
		return fmt.Errorf("endpoint %q: %w", ep.Name, err)
	}
	if len(ep.Headers) > MaxHeaders {
		return fmt.Errorf("%w: %q has %d headers, above %d", ErrInvalidEndpoint, ep.Name, len(ep.Headers), MaxHeaders)
	}
	for k, v := range ep.Headers {
		if !validHeaderName(k) {
			return fmt.Errorf("%w: %q: header name %q is not an HTTP token", ErrInvalidEndpoint, ep.Name, k)
		}
		lk := strings.ToLower(k)
		if strings.HasPrefix(lk, "webhook-") || strings.HasPrefix(lk, "timerq-") || slices.ContainsFunc(reserved, func(r string) bool { return strings.EqualFold(k, r) }) {
			return fmt.Errorf("%w: %q: header %q is set by the dispatcher; choose another name", ErrInvalidEndpoint, ep.Name, k)
		}
		if strings.ContainsAny(v, "\r\n\x00") || !utf8.ValidString(v) {
			return fmt.Errorf("%w: %q: header %q has a line break, NUL or invalid UTF-8 in its value", ErrInvalidEndpoint, ep.Name, k)
		}
	}
	return nil
}

func validHeaderName(k string) bool {
	if k == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}

// Fire is one fire to deliver: what the request carries.
type Fire struct {
	// Namespace and TimerID name the timer; with Due they make the
	// webhook-id (MessageID).
	Namespace, TimerID string
	// Due and FiredAt are the timer's due and fired times.
	Due, FiredAt time.Time
	// Payload is the request body.
	Payload []byte
	// Attempt is this attempt's number, from 1.
	Attempt int
	// TraceParent is the W3C traceparent to send, or "".
	TraceParent string
	// Owner is the timer's owner, "" for none, and Epoch the owner's
	// fencing epoch the timer was scheduled under: sent as timerq-owner
	// and timerq-epoch when Owner is set, so that a receiver that took the
	// owner over at a later epoch refuses the fire.
	Owner string
	Epoch uint64
}

// Attempt is what one attempt did: the entry of a delivery's attempt log.
type Attempt struct {
	// At is when the request was sent; Latency how long until the answer
	// was read (or the attempt failed).
	At      time.Time
	Latency time.Duration
	// Status is the answer's status code, 0 if there was none.
	Status int
	// Error is a bounded excerpt (MaxErrorExcerpt bytes) of what went
	// wrong: the transport error, or the start of a non-2xx answer's body.
	Error string
	// BodyBytes is how much of the answer's body was read (at most the
	// Sender's MaxBody); Truncated says the body was longer.
	BodyBytes int64
	Truncated bool
	// Decision is the verdict of Decide: outcome, reason and the delay
	// before the next attempt.
	Decision
}

// Sender sends attempts. The zero value is usable: it delivers through a
// default Guard, which refuses every private range. Reuse one Sender for
// every endpoint, so that connections are kept alive.
type Sender struct {
	// Client sends the requests; nil means one made once by Guard.Client.
	// A client of your own bypasses the guard unless it dials through it.
	Client *http.Client
	// Guard makes the default Client; nil means a zero Guard.
	Guard *Guard
	// MaxBody is how much of an answer's body is read; the rest is not
	// read and the connection is closed. 0 means DefaultMaxBody (64 KiB).
	MaxBody int64
	// UserAgent is sent as User-Agent; "" means "timerq-deliver/1".
	UserAgent string
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Jitter draws backoff delays (Decide); nil means math/rand/v2.
	Jitter func(max time.Duration) time.Duration

	once   sync.Once
	client *http.Client
}

func (s *Sender) httpClient() *http.Client {
	if s.Client != nil {
		return s.Client
	}
	s.once.Do(func() { s.client = s.Guard.Client() })
	return s.client
}

// CloseIdleConnections closes the idle keep-alive connections of the
// Sender's client; call it when done with the Sender.
func (s *Sender) CloseIdleConnections() { s.httpClient().CloseIdleConnections() }

// Send makes one attempt to deliver f to ep: a POST of f.Payload to ep.URL
// with ep.Headers, the signature headers (signed with every secret of
// ep.Secrets) and the timerq-* headers, within ep.Timeout. It reads at
// most MaxBody of the answer and returns the attempt, with Decide's verdict
// under ep.Policy. It never returns an error: a failure is an Attempt
// whose Decision says what to do. Safe for concurrent use.
func (s *Sender) Send(ctx context.Context, ep Endpoint, f Fire) Attempt {
	now := time.Now
	if s.Now != nil {
		now = s.Now
	}
	timeout := ep.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	maxBody := s.MaxBody
	if maxBody <= 0 {
		maxBody = DefaultMaxBody
	}
	a := Attempt{At: now()}
	finish := func(r Result) Attempt {
		r.At = now()
		a.Latency = r.At.Sub(a.At)
		a.Decision = Decide(ep.Policy, f.Attempt, f.Due, r, s.Jitter)
		return a
	}
	// The form of the URL is checked here, its address when dialled: a
	// URL that can never be delivered to is a dead letter, not a retry.
	u, err := parseURL(ep.URL)
	if err != nil {
		a.Error = excerpt(err.Error())
		return finish(Result{Err: err, Refused: true})
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(f.Payload))
	if err != nil {
		a.Error = excerpt(err.Error())
		return finish(Result{Err: err, Refused: true})
	}
	// One map of the right size, and the values set here in one slice
	// and one string: a request's headers cost a few allocations, not
	// two or three per header.
	extra := 10
	if f.Owner != "" {
		extra += 2 // timerq-owner, timerq-epoch
	}
	h := make(http.Header, len(ep.Headers)+extra)
	req.Header = h
	vals := make([]string, 0, extra)
	one := func(v string) []string { vals = append(vals, v); return vals[len(vals)-1 : len(vals) : len(vals)] }
	for k, v := range ep.Headers {
		h.Set(k, v)
	}
	if h.Get("Content-Type") == "" {
		if json.Valid(f.Payload) {
			h["Content-Type"] = one("application/json")
		} else {
			h["Content-Type"] = one("application/octet-stream")
		}
	}
	ua := s.UserAgent
	if ua == "" {
		ua = "timerq-deliver/1"
	}
	h["User-Agent"] = one(ua)
	bp := headerBufs.Get().(*[]byte)
	b := appendMessageID((*bp)[:0], f.Namespace, f.TimerID, f.Due)
	idEnd := len(b)
	b = strconv.AppendInt(b, a.At.Unix(), 10)
	tsEnd := len(b)
	if len(ep.Secrets) > 0 {
		b = appendSignature(b, b[:idEnd], a.At.Unix(), f.Payload, ep.Secrets)
	}
	sigEnd := len(b)
	b = append(b, url.PathEscape(f.TimerID)...)
	timerEnd := len(b)
	b = f.Due.UTC().AppendFormat(b, timeFormat)
	dueEnd := len(b)
	if !f.FiredAt.IsZero() {
		b = f.FiredAt.UTC().AppendFormat(b, timeFormat)
	}
	firedEnd := len(b)
	b = strconv.AppendInt(b, int64(max(f.Attempt, 1)), 10)
	attemptEnd := len(b)
	if f.Owner != "" {
		b = append(b, url.PathEscape(f.Owner)...)
	}
	ownerEnd := len(b)
	if f.Owner != "" {
		b = strconv.AppendUint(b, f.Epoch, 10)
	}
	v := string(b)
	if cap(b) <= 4<<10 {
		*bp = b
		headerBufs.Put(bp)
	}
	// Lower-case names, as Standard Webhooks writes them (HTTP/1.1 names
	// are case-insensitive; HTTP/2 lower-cases them anyway).
	setRaw(h, HeaderID, canonID, one(v[:idEnd]))
	setRaw(h, HeaderTimestamp, canonTimestamp, one(v[idEnd:tsEnd]))
	if len(ep.Secrets) > 0 {
		setRaw(h, HeaderSignature, canonSignature, one(v[tsEnd:sigEnd]))
	}
	setRaw(h, HeaderTimerID, canonTimerID, one(v[sigEnd:timerEnd]))
	setRaw(h, HeaderDueAt, canonDueAt, one(v[timerEnd:dueEnd]))
	if !f.FiredAt.IsZero() {
		setRaw(h, HeaderFiredAt, canonFiredAt, one(v[dueEnd:firedEnd]))
	}
	setRaw(h, HeaderAttempt, canonAttempt, one(v[firedEnd:attemptEnd]))
	if f.TraceParent != "" {
		setRaw(h, HeaderTrace, canonTrace, one(f.TraceParent))
	}
	if f.Owner != "" {
		setRaw(h, HeaderOwner, canonOwner, one(v[attemptEnd:ownerEnd]))
		setRaw(h, HeaderEpoch, canonEpoch, one(v[ownerEnd:]))
	}

	resp, err := s.httpClient().Do(req)
	if err != nil {
		a.Error = excerpt(err.Error())
		return finish(Result{Err: err, Refused: errors.Is(err, ErrRefused), Timeout: ctx.Err() != nil || isTimeout(err)})
	}
	a.Status = resp.StatusCode
	var headBuf [MaxErrorExcerpt]byte // on the stack: most answers have no body to keep
	n, kept, rerr := readCapped(resp.Body, maxBody, headBuf[:])
	head := headBuf[:kept]
	resp.Body.Close()
	a.BodyBytes, a.Truncated = min(n, maxBody), n > maxBody
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		a.Error = string(head)
		if n > int64(len(head)) {
			a.Error += "…" // more followed: excerpt cuts and marks it
		}
		a.Error = excerpt(a.Error)
		if a.Error == "" {
			a.Error = resp.Status
		}
	}
	if resp.StatusCode >= 300 && resp.StatusCode <= 399 {
		a.Error = excerpt(notFollowed(resp))
	}
	r := Result{Status: resp.StatusCode, RetryAfter: resp.Header.Get("Retry-After")}
	if rerr != nil && (resp.StatusCode < 200 || resp.StatusCode > 299) {
		// The status was read: it decides. A 2xx whose body failed is
		// still delivered: the receiver said so before the body ended.
		a.Error = excerpt(a.Error + "; reading the body: " + rerr.Error())
	}
	return finish(r)
}

// notFollowed says why the redirect resp was the answer (Guard.Client),
// then where it pointed (last, so that a long URL is what the excerpt
// cuts).
func notFollowed(resp *http.Response) string {
	to := resp.Header.Get("Location")
	if u, err := resp.Location(); err == nil {
		to = u.Redacted()
	}
	why := "only 307 and 308 redirects are ever followed (with --deliver-max-redirects), as they repeat the POST with its body"
	if resp.StatusCode == http.StatusTemporaryRedirect || resp.StatusCode == http.StatusPermanentRedirect {
		why = "the guard follows no redirects (timerworker --deliver-max-redirects 0, the default)"
	}
	return fmt.Sprintf("HTTP %d not followed: %s; give the endpoint the URL it points to: %s", resp.StatusCode, why, to)
}

// timeFormat is RFC 3339 in UTC with milliseconds.
const timeFormat = "2006-01-02T15:04:05.000Z07:00"

// setRaw sets a header under its lower-case name k as given, after
// deleting it under its canonical name canon (a configured header of
// Send's caller may hold it).
func setRaw(h http.Header, k, canon string, v []string) {
	delete(h, canon)
	h[k] = v
}

// The canonical forms of the headers setRaw sets, worked out once.
var (
	canonID        = textproto.CanonicalMIMEHeaderKey(HeaderID)
	canonTimestamp = textproto.CanonicalMIMEHeaderKey(HeaderTimestamp)
	canonSignature = textproto.CanonicalMIMEHeaderKey(HeaderSignature)
	canonTimerID   = textproto.CanonicalMIMEHeaderKey(HeaderTimerID)
	canonDueAt     = textproto.CanonicalMIMEHeaderKey(HeaderDueAt)
	canonFiredAt   = textproto.CanonicalMIMEHeaderKey(HeaderFiredAt)
	canonAttempt   = textproto.CanonicalMIMEHeaderKey(HeaderAttempt)
	canonTrace     = textproto.CanonicalMIMEHeaderKey(HeaderTrace)
	canonOwner     = textproto.CanonicalMIMEHeaderKey(HeaderOwner)
	canonEpoch     = textproto.CanonicalMIMEHeaderKey(HeaderEpoch)
)

// headerBufs holds the buffers Send builds its header values in.
var headerBufs = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

// bodyBufs holds the buffers answers' bodies are read into.
var bodyBufs = sync.Pool{New: func() any { b := make([]byte, 16<<10); return &b }}

// readCapped reads r until EOF or past limit, copying the first bytes into
// head (kept of them), and returns how many bytes it read: at most
// limit+1, so a body longer than limit is never read whole.
func readCapped(r io.Reader, limit int64, head []byte) (n int64, kept int, err error) {
	bp := bodyBufs.Get().(*[]byte)
	defer bodyBufs.Put(bp)
	buf := *bp
	for n <= limit {
		m, err := r.Read(buf[:min(int64(len(buf)), limit+1-n)])
		kept += copy(head[kept:], buf[:m])
		n += int64(m)
		if err == io.EOF {
			return n, kept, nil
		}
		if err != nil {
			return n, kept, err
		}
	}
	return n, kept, nil
}

// excerpt bounds s to MaxErrorExcerpt bytes of valid UTF-8 on one line.
func excerpt(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.Map(func(r rune) rune {
		if r == '\n' || r == '\r' || r == '\t' {
			return ' '
		}
		if r < 0x20 || r == 0x7f {
			return -1
		}
		return r
	}, s)
	s = strings.TrimSpace(s)
	if len(s) <= MaxErrorExcerpt {
		return s
	}
	cut := MaxErrorExcerpt - len("…")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
