package deliver

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Defaults of Policy.
const (
	// DefaultMaxAttempts is Policy.MaxAttempts when it is 0.
	DefaultMaxAttempts = 10
	// DefaultMaxAge is Policy.MaxAge when it is 0.
	DefaultMaxAge = 24 * time.Hour
	// DefaultBackoffBase is Policy.Base when it is 0.
	DefaultBackoffBase = time.Second
	// DefaultBackoffCap is Policy.Cap when it is 0.
	DefaultBackoffCap = 10 * time.Minute
	// MaxPolicyAttempts is the most attempts a Policy may allow.
	MaxPolicyAttempts = 1000
)

// ErrInvalidPolicy means a retry policy has a negative field, or a base
// above its cap.
var ErrInvalidPolicy = errors.New("timerq: deliver: invalid retry policy")

// Policy is an endpoint's retry policy. The zero value selects every
// default; a negative field is refused by Validate.
type Policy struct {
	// MaxAttempts is how many attempts a fire gets; after the last failed
	// one it is dead-lettered. 0 means DefaultMaxAttempts (10);
	// 1..MaxPolicyAttempts.
	MaxAttempts int
	// MaxAge is how long after its due time a fire may still be retried:
	// a retry that would start later is not made, and the fire is
	// dead-lettered. 0 means DefaultMaxAge (24 h).
	MaxAge time.Duration
	// Base and Cap shape the backoff between attempts: before attempt
	// n+1 the dispatcher waits a random time in [0, min(Cap, Base·2^(n-1))]
	// ("full jitter"), unless the endpoint said when with Retry-After. 0
	// means DefaultBackoffBase (1 s) and DefaultBackoffCap (10 min).
	Base, Cap time.Duration
	// RetryClientErrors retries 4xx answers other than 408, 410 and 429
	// (and 3xx, a redirect not followed) with backoff, as server errors
	// are. By default they are dead-lettered at once: the request itself
	// is wrong and sending it again will not help.
	RetryClientErrors bool
}

// WithDefaults returns p with each zero field set to its default, or an
// error wrapping ErrInvalidPolicy.
func (p Policy) WithDefaults() (Policy, error) {
	if p.MaxAttempts < 0 || p.MaxAge < 0 || p.Base < 0 || p.Cap < 0 {
		return p, fmt.Errorf("%w: fields must not be negative; use 0 for the defaults", ErrInvalidPolicy)
	}
	if p.MaxAttempts == 0 {
		p.MaxAttempts = DefaultMaxAttempts
	}
	if p.MaxAttempts > MaxPolicyAttempts {
		return p, fmt.Errorf("%w: %d attempts, above %d", ErrInvalidPolicy, p.MaxAttempts, MaxPolicyAttempts)
	}
	if p.MaxAge == 0 {
		p.MaxAge = DefaultMaxAge
	}
	if p.Base == 0 {
		p.Base = DefaultBackoffBase
	}
	if p.Cap == 0 {
		p.Cap = max(DefaultBackoffCap, p.Base)
	}
	if p.Base > p.Cap {
		return p, fmt.Errorf("%w: backoff base %v is above its cap %v", ErrInvalidPolicy, p.Base, p.Cap)
	}
	return p, nil
}

// Outcome is what became of one attempt.
type Outcome int

const (
	// Delivered: the endpoint answered 2xx.
	Delivered Outcome = iota
	// Retry: the attempt failed and the fire is tried again after
	// Decision.Delay.
	Retry
	// DeadLetter: the attempt failed and the fire is not tried again; it
	// goes to the dead letters, from where it can be redriven.
	DeadLetter
)

// String is "delivered", "retry" or "dead_letter", the metric label.
func (o Outcome) String() string {
	switch o {
	case Delivered:
		return "delivered"
	case Retry:
		return "retry"
	case DeadLetter:
		return "dead_letter"
	}
	return "Outcome(" + strconv.Itoa(int(o)) + ")"
}

// Reason says why an attempt had its outcome; its values are stable
// metric labels.
type Reason string

// Reasons.
const (
	ReasonOK          Reason = "ok"           // 2xx
	ReasonRetryAfter  Reason = "retry_after"  // 429 or 503 with a usable Retry-After
	ReasonThrottled   Reason = "throttled"    // 429 or 503 without one: backoff
	ReasonServerError Reason = "server_error" // 408, 5xx
	ReasonTimeout     Reason = "timeout"      // no answer within the endpoint's timeout
	ReasonConnection  Reason = "connection"   // no connection, reset, TLS failure, bad answer
	ReasonRefused     Reason = "refused"      // the SSRF guard refused the address
	ReasonGone        Reason = "gone"         // 410: the receiver wants no more
	ReasonClientError Reason = "client_error" // other 4xx
	ReasonRedirect    Reason = "redirect"     // 3xx not followed
	ReasonExhausted   Reason = "exhausted"    // the policy's last attempt failed
	ReasonExpired     Reason = "expired"      // the next try would be past MaxAge
	// ReasonDeadline: the fire's own deadline (queue.Event.Deadline) had
	// passed, or would have before the attempt or its retry could begin;
	// a dispatcher decides it, not Decide.
	ReasonDeadline Reason = "deadline"
)

// Result is what one request produced, the input of Decide besides the
// policy: a status (0 if there was no answer), the Retry-After header, the
// transport error, and when the answer arrived.
type Result struct {
	Status     int
	RetryAfter string
	// Err is the transport error when there was no answer; Timeout says
	// whether it was the endpoint's timeout running out.
	Err     error
	Timeout bool
	// Refused means the SSRF guard refused the address (Err wraps
	// ErrRefused).
	Refused bool
	// At is when the answer (or the error) came, for Retry-After dates
	// and MaxAge.
	At time.Time
}

// Decision is Decide's verdict on one attempt.
type Decision struct {
	Outcome Outcome
	Reason  Reason
	// Delay is how long to wait before the next attempt; 0 unless
	// Outcome is Retry.
	Delay time.Duration
	// Cause is the failure that led to a dead letter when the policy ran
	// out (ReasonExhausted, ReasonExpired): what the last attempt saw.
	Cause Reason
}

// Decide classifies attempt number attempt (1 for the first) of a fire
// due at due, which produced r, under policy p (defaults applied by
// Decide), and says what comes next:
//
//   - 2xx: Delivered.
//   - 429 and 503: Retry, after the Retry-After header (delta seconds or
//     an HTTP date) if it has a usable one, else with backoff.
//   - 408, other 5xx, a timeout, a connection error: Retry with backoff.
//   - 410 Gone: DeadLetter at once; the endpoint asked for no more.
//   - other 4xx, and 3xx (a redirect not followed): DeadLetter at once,
//     or Retry with backoff under RetryClientErrors.
//   - an address the SSRF guard refused: DeadLetter at once.
//
// A Retry becomes a DeadLetter (ReasonExhausted) when attempt was the
// policy's last, and (ReasonExpired) when the next attempt would start
// more than MaxAge after due. Backoff is full jitter: uniform in
// [0, min(Cap, Base·2^(attempt-1))]; jitter draws it, uniform in [0, max]
// (nil means math/rand/v2), so tests can fix it.
func Decide(p Policy, attempt int, due time.Time, r Result, jitter func(max time.Duration) time.Duration) Decision {
	p, err := p.WithDefaults()
	if err != nil {
		p = Policy{MaxAttempts: DefaultMaxAttempts, MaxAge: DefaultMaxAge, Base: DefaultBackoffBase, Cap: DefaultBackoffCap}
	}
	if jitter == nil {
		jitter = func(max time.Duration) time.Duration {
			if max <= 0 {
				return 0
			}
			return rand.N(max + 1)
		}
	}
	backoff := func(reason Reason) Decision {
		ceiling := p.Cap
		if attempt >= 1 && attempt <= 62 {
			if b := p.Base << (attempt - 1); b > 0 && b>>(attempt-1) == p.Base && b < ceiling {
				ceiling = b
			}
		}
		return Decision{Outcome: Retry, Reason: reason, Delay: min(max(jitter(ceiling), 0), ceiling)}
	}
	var d Decision
	switch s := r.Status; {
	case s >= 200 && s <= 299:
		return Decision{Outcome: Delivered, Reason: ReasonOK}
	case s == http.StatusTooManyRequests || s == http.StatusServiceUnavailable:
		if after, ok := ParseRetryAfter(r.RetryAfter, r.At); ok {
			d = Decision{Outcome: Retry, Reason: ReasonRetryAfter, Delay: after}
		} else {
			d = backoff(ReasonThrottled)
		}
	case s == http.StatusGone:
		return Decision{Outcome: DeadLetter, Reason: ReasonGone}
	case s == http.StatusRequestTimeout || s >= 500:
		d = backoff(ReasonServerError)
	case s >= 300 && s <= 499 || s > 0 && s < 200:
		reason := ReasonClientError
		if s < 400 {
			reason = ReasonRedirect
		}
		if !p.RetryClientErrors {
			return Decision{Outcome: DeadLetter, Reason: reason}
		}
		d = backoff(reason)
	case r.Refused:
		return Decision{Outcome: DeadLetter, Reason: ReasonRefused}
	case r.Timeout:
		d = backoff(ReasonTimeout)
	default:
		d = backoff(ReasonConnection)
	}
	if attempt >= p.MaxAttempts {
		return Decision{Outcome: DeadLetter, Reason: ReasonExhausted, Cause: d.Reason}
	}
	if !due.IsZero() && r.At.Add(d.Delay).Sub(due) > p.MaxAge {
		return Decision{Outcome: DeadLetter, Reason: ReasonExpired, Cause: d.Reason}
	}
	return d
}

// ParseRetryAfter reads a Retry-After header value: delta seconds
// ("120") or an HTTP date, counted from now. A date in the past gives 0.
// ok is false for an empty or unreadable value.
func ParseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if n, err := strconv.ParseUint(v, 10, 63); err == nil {
		if n > uint64(365*24*time.Hour/time.Second) {
			n = uint64(365 * 24 * time.Hour / time.Second)
		}
		return time.Duration(n) * time.Second, true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	return max(t.Sub(now), 0), true
}

// isTimeout reports whether err is a timeout.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
