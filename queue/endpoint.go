package queue

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"net/textproto"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/timerq/timerq/deliver"
	"github.com/timerq/timerq/internal/keyspace"
	"github.com/timerq/timerq/scripts/lua"
)

// Endpoint errors.
var (
	// ErrInvalidEndpoint means an endpoint's configuration is refused; the
	// message says which field and why. Nothing was written.
	ErrInvalidEndpoint = errors.New("timerq: invalid endpoint")
	// ErrEndpointNotFound means the namespace has no endpoint of that name:
	// reading, changing or deleting it, or scheduling a timer that
	// delivers to it.
	ErrEndpointNotFound = errors.New("timerq: endpoint not found")
	// ErrPrivateAddress means an endpoint URL's host is an address literal
	// (or localhost) in a range deliveries never reach by default
	// (loopback, private, link-local, multicast, unspecified, CGNAT, cloud
	// metadata); PutEndpointOptions.Allow admits a range explicitly.
	ErrPrivateAddress = fmt.Errorf("%w: private or reserved address", ErrInvalidEndpoint)
)

// Limits of an Endpoint. They are those of the delivery engine (package
// deliver), so that every endpoint stored can be delivered to.
const (
	// MaxEndpointNameLen is the longest endpoint name, in bytes.
	MaxEndpointNameLen = 64
	// MaxEndpointURLLen is the longest endpoint URL, in bytes.
	MaxEndpointURLLen = 2048 // deliver.ValidateURL's limit
	// MaxEndpointHeaders is the most extra headers an endpoint may have.
	MaxEndpointHeaders = 32
	// MaxEndpointTimeout is the longest Endpoint.Timeout.
	MaxEndpointTimeout = 5 * time.Minute
	// MaxEndpointSecrets is the most signing secrets an endpoint may have
	// at once: more than enough for a rotation.
	MaxEndpointSecrets = 4
	// MinSecretBytes and MaxSecretBytes bound a signing secret's key, as
	// Standard Webhooks does: "whsec_" and the base64 of 24 to 64 bytes.
	MinSecretBytes = deliver.MinSecretBytes
	MaxSecretBytes = deliver.MaxSecretBytes
	// MaxRetryAttempts is the most attempts a RetryPolicy may allow.
	MaxRetryAttempts = 1000
	// MaxEndpointInFlight is the largest Endpoint.MaxInFlight.
	MaxEndpointInFlight = 10000
)

// SecretPrefix starts every signing secret: "whsec_" and the key in
// standard base64 (Standard Webhooks).
const SecretPrefix = deliver.SecretPrefix

// Secret is a signing secret in its text form, "whsec_<base64 key>". It is
// never printed whole: String, GoString, fmt's verbs and MarshalJSON show
// only Redacted. Reveal returns the full text, for signing.
type Secret string

// Reveal returns the secret's full text. Never log it.
func (s Secret) Reveal() string { return string(s) }

// Redacted is how timerq shows a secret: the prefix, the first 4
// characters of the key and the first 8 hex digits of the SHA-256 of the
// whole text, e.g. "whsec_MfKQ…(a1b2c3d4)": enough to tell two secrets
// apart, too little to sign with.
func (s Secret) Redacted() string {
	b64, ok := strings.CutPrefix(string(s), SecretPrefix)
	if !ok || len(b64) < 8 {
		return SecretPrefix + "…"
	}
	return SecretPrefix + b64[:4] + fingerprint(string(s))
}

// fingerprint is "…(" and the first 8 hex digits of the SHA-256 of s ")":
// the tail of every redacted value timerq shows.
func fingerprint(s string) string {
	sum := sha256.Sum256([]byte(s))
	return "…(" + hex.EncodeToString(sum[:4]) + ")"
}

// RedactHeader is how timerq shows the value of an endpoint's header,
// everywhere it leaves the server (the HTTP API, timerctl, the dashboard,
// logs): "…(" and the first 8 hex digits of the SHA-256 of the value ")",
// e.g. "…(a1b2c3d4)". Header values often carry credentials
// (Authorization: Bearer …) and, unlike a secret, have no public prefix,
// so none of the value is shown: the fingerprint tells two values apart
// and checks a value one holds, and is too little to send.
func RedactHeader(value string) string { return fingerprint(value) }

// IsRedactedHeader reports whether v has the form RedactHeader gives, so
// that a value read back and sent again is refused rather than stored.
func IsRedactedHeader(v string) bool {
	h, ok := strings.CutPrefix(v, "…(")
	h, ok2 := strings.CutSuffix(h, ")")
	if !ok || !ok2 || len(h) != 8 {
		return false
	}
	_, err := hex.DecodeString(h)
	return err == nil
}

// RedactedHeaders returns e's headers with each value redacted
// (RedactHeader); an empty map, never nil, when it has none.
func (e Endpoint) RedactedHeaders() map[string]string {
	out := make(map[string]string, len(e.Headers))
	for k, v := range e.Headers {
		out[k] = RedactHeader(v)
	}
	return out
}

// String is Redacted.
func (s Secret) String() string { return s.Redacted() }

// GoString is Redacted, so that %#v does not print the key either.
func (s Secret) GoString() string { return s.Redacted() }

// MarshalJSON writes Redacted: an Endpoint marshalled to JSON never carries
// its secrets.
func (s Secret) MarshalJSON() ([]byte, error) { return json.Marshal(s.Redacted()) }

// ValidateSecret checks a signing secret: "whsec_" followed by the
// standard base64 of MinSecretBytes..MaxSecretBytes bytes. The error,
// wrapping ErrInvalidEndpoint, never repeats the secret.
func ValidateSecret(s string) error {
	if p := secretProblem(s); p != "" {
		return fmt.Errorf("%w: %s", ErrInvalidEndpoint, p)
	}
	return nil
}

// secretProblem says what is wrong with a secret, "" when nothing is: the
// check of the delivery engine (deliver.ParseSecret), so that every secret
// stored can sign.
func secretProblem(s string) string {
	if _, err := deliver.ParseSecret(s); err != nil {
		msg := err.Error()
		if m, ok := strings.CutPrefix(msg, deliver.ErrInvalidSecret.Error()+": "); ok {
			msg = "the secret: " + m
		}
		return msg
	}
	return ""
}

// RetryPolicy is an endpoint's retry policy. Zero fields mean the delivery
// engine's defaults (10 attempts, 24 h, 1 s base, 10 min cap); a negative
// one is refused.
type RetryPolicy struct {
	// MaxAttempts is how many attempts a fire gets before it is
	// dead-lettered; 0 means the default, at most MaxRetryAttempts.
	MaxAttempts int `json:"max_attempts,omitempty"`
	// MaxAge is how long after its due time a fire may still be retried;
	// 0 means the default.
	MaxAge time.Duration `json:"max_age,omitempty"`
	// Base and Cap shape the exponential, fully jittered backoff; 0 means
	// the default. Base may not exceed Cap when both are set.
	Base time.Duration `json:"base,omitempty"`
	Cap  time.Duration `json:"cap,omitempty"`
	// RetryClientErrors retries 4xx answers other than 408, 410 and 429
	// with backoff. By default they are dead-lettered at once.
	RetryClientErrors bool `json:"retry_client_errors,omitempty"`
}

// Endpoint is an HTTP endpoint that fires are delivered to, stored once per
// namespace under its name. A timer, batch item or recurring schedule
// names it (NewTimer.Endpoint); only the name is stored with the timer.
//
// Its secrets are kept in Redis in full (docs/security.md says who can
// read them); String and JSON show them redacted.
type Endpoint struct {
	// Name identifies the endpoint in the namespace: 1 to
	// MaxEndpointNameLen bytes of letters, digits, '.', '_' and '-'.
	Name string `json:"name"`
	// URL is an absolute http or https URL with a host and without user
	// information or fragment. A host that is an address literal in a
	// private or reserved range, or localhost, is refused unless
	// PutEndpointOptions.Allow admits its range (localhost is refused:
	// use 127.0.0.1).
	URL string `json:"url"`
	// Headers are sent with every request. They may not set the
	// webhook-*, timerq-* or traceparent headers, nor Host,
	// Content-Length, Transfer-Encoding or Connection.
	Headers map[string]string `json:"headers,omitempty"`
	// Timeout bounds one attempt; 0 means the delivery engine's default
	// (30 s), at most MaxEndpointTimeout.
	Timeout time.Duration `json:"timeout,omitempty"`
	// Retry is the retry policy.
	Retry RetryPolicy `json:"retry"`
	// MaxInFlight bounds the attempts to this endpoint under way at once
	// in one dispatcher; 0 means the default (16).
	MaxInFlight int `json:"max_in_flight,omitempty"`
	// Secrets are the signing secrets, 1 to MaxEndpointSecrets: each
	// request carries one signature per secret, so that a receiver can
	// move from the old to the new during a rotation.
	Secrets []Secret `json:"secrets"`
	// Disabled pauses deliveries to the endpoint; timers naming it may
	// still be scheduled.
	Disabled bool `json:"disabled,omitempty"`
	// UpdatedAt is when Endpoints.Put or Endpoints.SetEnabled last wrote it,
	// by the client's clock; set by them, ignored on input.
	UpdatedAt time.Time `json:"updated_at"`
}

// String shows the endpoint with its secrets and header values redacted.
func (e Endpoint) String() string {
	secrets := make([]string, len(e.Secrets))
	for i, s := range e.Secrets {
		secrets[i] = s.Redacted()
	}
	state := "enabled"
	if e.Disabled {
		state = "disabled"
	}
	headers := ""
	for _, k := range slices.Sorted(maps.Keys(e.Headers)) {
		headers += ", header " + k + ": " + RedactHeader(e.Headers[k])
	}
	return fmt.Sprintf("endpoint %s %s (%s, secrets %s%s)", e.Name, e.URL, state, strings.Join(secrets, " "), headers)
}

// GoString is String, so that %#v shows no secret nor header value.
func (e Endpoint) GoString() string { return e.String() }

// MarshalJSON writes the endpoint with its secrets and header values
// redacted: an Endpoint marshalled to JSON, or logged by slog's JSON
// handler, carries neither.
func (e Endpoint) MarshalJSON() ([]byte, error) {
	type plain Endpoint // without this method
	p := plain(e)
	if e.Headers != nil {
		p.Headers = e.RedactedHeaders()
	}
	return json.Marshal(p)
}

// reservedHeaders are the headers the delivery engine sets itself.
var reservedHeaders = []string{"Host", "Content-Length", "Transfer-Encoding", "Connection", "Traceparent"}

// PutEndpointOptions are Endpoints.Put's options; nil means none.
type PutEndpointOptions struct {
	// Allow admits endpoint URLs whose host is an address literal in one
	// of these ranges, though it is loopback, private or otherwise
	// reserved. The host localhost is always refused: use 127.0.0.1.
	// It is the registration-time check only: the dispatcher's SSRF
	// guard checks every address it dials against its own allow list.
	Allow []netip.Prefix
}

// ValidateEndpointName checks an endpoint name: 1 to MaxEndpointNameLen
// bytes of ASCII letters, digits, '.', '_' and '-'.
func ValidateEndpointName(name string) error {
	if name == "" || len(name) > MaxEndpointNameLen {
		return fmt.Errorf("%w: name %q is not 1 to %d bytes", ErrInvalidEndpoint, name, MaxEndpointNameLen)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("%w: name %q has %q; use letters, digits, '.', '_' and '-'", ErrInvalidEndpoint, name, c)
		}
	}
	return nil
}

// ValidateEndpoint checks an endpoint as Endpoints.Put does, without Redis;
// opts may be nil. Errors wrap ErrInvalidEndpoint (ErrPrivateAddress for
// a refused address) and never repeat a secret.
func ValidateEndpoint(e Endpoint, opts *PutEndpointOptions) error {
	if err := ValidateEndpointName(e.Name); err != nil {
		return err
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: endpoint %q: "+format, append([]any{ErrInvalidEndpoint, e.Name}, args...)...)
	}
	if p, private := urlProblem(e.URL, opts); p != "" {
		if private {
			return fmt.Errorf("%w: endpoint %q: %s", ErrPrivateAddress, e.Name, p)
		}
		return bad("%s", p)
	}
	if len(e.Headers) > MaxEndpointHeaders {
		return bad("%d headers, above %d", len(e.Headers), MaxEndpointHeaders)
	}
	for k, v := range e.Headers {
		if p := headerProblem(k, v); p != "" {
			return bad("%s", p)
		}
	}
	if e.Timeout < 0 || e.Timeout > MaxEndpointTimeout {
		return bad("timeout %v is outside 0..%v (0 for the default)", e.Timeout, MaxEndpointTimeout)
	}
	r := e.Retry
	switch {
	case r.MaxAttempts < 0 || r.MaxAge < 0 || r.Base < 0 || r.Cap < 0:
		return bad("a retry field is negative; use 0 for the default")
	case r.MaxAttempts > MaxRetryAttempts:
		return bad("%d attempts, above %d", r.MaxAttempts, MaxRetryAttempts)
	case r.Base > 0 && r.Cap > 0 && r.Base > r.Cap:
		return bad("backoff base %v is above its cap %v", r.Base, r.Cap)
	}
	if e.MaxInFlight < 0 || e.MaxInFlight > MaxEndpointInFlight {
		return bad("max in flight %d is outside 0..%d (0 for the default)", e.MaxInFlight, MaxEndpointInFlight)
	}
	if len(e.Secrets) == 0 || len(e.Secrets) > MaxEndpointSecrets {
		return bad("%d signing secrets; give 1 to %d", len(e.Secrets), MaxEndpointSecrets)
	}
	for i, sec := range e.Secrets {
		if p := secretProblem(string(sec)); p != "" {
			return bad("secret %d: %s", i+1, p)
		}
		if slices.Contains(e.Secrets[:i], sec) {
			return bad("secret %d repeats an earlier one", i+1)
		}
	}
	// Last, the delivery engine's own check, so that every endpoint stored
	// can be delivered to (it also refuses NAT64 forms of refused IPv4
	// addresses, cloud metadata addresses inside an allowed range, and
	// header values that are not UTF-8).
	var g deliver.Guard
	if opts != nil {
		g.Allow = opts.Allow
	}
	if _, err := e.Deliver(&g); err != nil {
		msg := strings.NewReplacer(fmt.Sprintf("endpoint %q url: ", e.Name), "the URL: ", fmt.Sprintf("endpoint %q: ", e.Name), "",
			fmt.Sprintf("%q: ", e.Name), "", "timerq: deliver: ", "").Replace(err.Error())
		if errors.Is(err, deliver.ErrRefused) {
			return fmt.Errorf("%w: endpoint %q: %s", ErrPrivateAddress, e.Name, msg)
		}
		return bad("%s", msg)
	}
	return nil
}

// Deliver returns the endpoint as the delivery engine takes it (package
// deliver; a dispatcher's Lookup returns it), checked by
// deliver.Endpoint.Validate with the guard g (nil: the default guard,
// which refuses every private address). Errors wrap deliver's sentinels.
func (e Endpoint) Deliver(g *deliver.Guard) (deliver.Endpoint, error) {
	out := deliver.Endpoint{Name: e.Name, URL: e.URL, Headers: e.Headers, Timeout: e.Timeout,
		Policy: deliver.Policy{MaxAttempts: e.Retry.MaxAttempts, MaxAge: e.Retry.MaxAge, Base: e.Retry.Base,
			Cap: e.Retry.Cap, RetryClientErrors: e.Retry.RetryClientErrors},
		MaxInFlight: e.MaxInFlight, Disabled: e.Disabled}
	for _, s := range e.Secrets {
		p, err := deliver.ParseSecret(s.Reveal())
		if err != nil {
			return deliver.Endpoint{}, fmt.Errorf("endpoint %q: %w", e.Name, err)
		}
		out.Secrets = append(out.Secrets, p)
	}
	if err := out.Validate(g); err != nil {
		return deliver.Endpoint{}, err
	}
	return out, nil
}

// urlProblem says what is wrong with an endpoint URL ("" when nothing),
// and whether it is a refused private or reserved address. It is the
// delivery engine's own check (deliver.ValidateURL with a guard allowing
// opts.Allow), so that registration and the dispatcher's dial-time guard
// judge addresses alike; as the guard does, it judges by address only, so
// localhost is refused (use 127.0.0.1 and an allow rule).
func urlProblem(raw string, opts *PutEndpointOptions) (problem string, private bool) {
	g := &deliver.Guard{}
	if opts != nil {
		g.Allow = opts.Allow
	}
	_, err := deliver.ValidateURL(raw, g)
	switch {
	case err == nil:
		return "", false
	case errors.Is(err, deliver.ErrRefused):
		msg, _ := strings.CutPrefix(err.Error(), deliver.ErrRefused.Error()+": ")
		return "the URL's host: " + msg, true
	default:
		msg, _ := strings.CutPrefix(err.Error(), deliver.ErrInvalidURL.Error()+": ")
		if strings.HasPrefix(msg, "scheme ") {
			return "URL " + msg, false // URL scheme "ftp"; use …
		}
		return "URL: " + msg, false
	}
}

func headerProblem(k, v string) string {
	if k == "" || strings.ContainsFunc(k, func(r rune) bool {
		return r <= ' ' || r >= 0x7f || strings.ContainsRune("\"(),/:;<=>?@[\\]{}", r)
	}) {
		return fmt.Sprintf("header name %q is not an HTTP token", k)
	}
	c := textproto.CanonicalMIMEHeaderKey(k)
	lower := strings.ToLower(k)
	if slices.Contains(reservedHeaders, c) || strings.HasPrefix(lower, "webhook-") || strings.HasPrefix(lower, "timerq-") {
		return fmt.Sprintf("header %q is set by the delivery itself; remove it", k)
	}
	if strings.ContainsAny(v, "\r\n\x00") {
		return fmt.Sprintf("the value of header %q holds a line break or NUL", k)
	}
	if IsRedactedHeader(v) {
		return fmt.Sprintf("the value of header %q is %s, a value redacted as timerq shows it, not the value itself; give the header's real value", k, v)
	}
	return ""
}

// storedEndpoint is an endpoint as the endpoints hash keeps it: secrets in
// full, durations in milliseconds.
type storedEndpoint struct {
	URL         string            `json:"url"`
	Headers     map[string]string `json:"headers,omitempty"`
	TimeoutMS   int64             `json:"timeout_ms,omitempty"`
	MaxAttempts int               `json:"max_attempts,omitempty"`
	MaxAgeMS    int64             `json:"max_age_ms,omitempty"`
	BaseMS      int64             `json:"base_ms,omitempty"`
	CapMS       int64             `json:"cap_ms,omitempty"`
	Retry4xx    bool              `json:"retry_4xx,omitempty"`
	MaxInFlight int               `json:"max_in_flight,omitempty"`
	Secrets     []string          `json:"secrets"`
	Disabled    bool              `json:"disabled,omitempty"`
	UpdatedMS   int64             `json:"updated_ms"`
}

func encodeEndpoint(e Endpoint) (string, error) {
	s := storedEndpoint{URL: e.URL, Headers: e.Headers, TimeoutMS: e.Timeout.Milliseconds(),
		MaxAttempts: e.Retry.MaxAttempts, MaxAgeMS: e.Retry.MaxAge.Milliseconds(), BaseMS: e.Retry.Base.Milliseconds(),
		CapMS: e.Retry.Cap.Milliseconds(), Retry4xx: e.Retry.RetryClientErrors, MaxInFlight: e.MaxInFlight,
		Disabled: e.Disabled, UpdatedMS: e.UpdatedAt.UnixMilli()}
	for _, x := range e.Secrets {
		s.Secrets = append(s.Secrets, string(x))
	}
	b, err := json.Marshal(s)
	return string(b), err
}

func decodeEndpoint(key, name, v string) (Endpoint, error) {
	var s storedEndpoint
	if err := json.Unmarshal([]byte(v), &s); err != nil {
		return Endpoint{}, fmt.Errorf("%w: endpoint %q in %s is not the JSON timerq writes (%v); something else wrote it: put the endpoint again or HDEL it",
			ErrMalformedRecord, name, key, err)
	}
	ms := func(n int64) time.Duration { return time.Duration(n) * time.Millisecond }
	e := Endpoint{Name: name, URL: s.URL, Headers: s.Headers, Timeout: ms(s.TimeoutMS),
		Retry:       RetryPolicy{MaxAttempts: s.MaxAttempts, MaxAge: ms(s.MaxAgeMS), Base: ms(s.BaseMS), Cap: ms(s.CapMS), RetryClientErrors: s.Retry4xx},
		MaxInFlight: s.MaxInFlight, Disabled: s.Disabled, UpdatedAt: time.UnixMilli(s.UpdatedMS).UTC()}
	for _, x := range s.Secrets {
		e.Secrets = append(e.Secrets, Secret(x))
	}
	return e, nil
}

// Put creates or replaces the endpoint e.Name and reports whether
// it created it. It validates e first (ValidateEndpoint; opts may be nil)
// and writes nothing if it is refused. Durations are stored in whole
// milliseconds.
//
// The endpoint is stored once, in the namespace's endpoints hash; in a
// namespace of several shards each shard also gets its name, written after
// the endpoint, so that a timer scheduled on any shard may name it
// (CreateNamespace gives every shard the names of the endpoints put before
// it); putting an endpoint again repairs a shard that lacks its name.
//
// A new endpoint past the namespace's endpoints quota (SetQuotas) is
// refused with a *QuotaError and nothing written; replacing one never is.
func (eps Endpoints) Put(ctx context.Context, e Endpoint, opts *PutEndpointOptions) (created bool, err error) {
	q := eps.q
	if err := ValidateEndpoint(e, opts); err != nil {
		return false, err
	}
	e.UpdatedAt = time.Now().UTC().Truncate(time.Millisecond)
	v, err := encodeEndpoint(e)
	if err != nil {
		return false, errorf("put endpoint %q: %w", e.Name, err)
	}
	l, err := q.layout(ctx)
	if err != nil {
		return false, err
	}
	quotas, err := q.quotas(ctx)
	if err != nil {
		return false, err
	}
	keys := lua.EndpointPut.Keys(l.spaces[0], "")
	n, err := q.runScript(ctx, q.rdb, classic(lua.EndpointPut), keys, e.Name, v, quotas.Endpoints).Int64()
	if err != nil {
		return false, errorf("put endpoint %q: %w", e.Name, q.redisError(err))
	}
	if err := q.indexEndpoint(ctx, l, e.Name, true); err != nil {
		return false, err
	}
	return n == 1, nil
}

// indexEndpoint adds name to (or removes it from) every shard's endpoint
// names, in a namespace of several shards.
func (q *Queue) indexEndpoint(ctx context.Context, l *layout, name string, add bool) error {
	if len(l.spaces) <= 1 {
		return nil
	}
	cmds, err := q.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, sp := range l.spaces {
			if add {
				p.HSet(ctx, sp.EndpointNames(), name, "1")
			} else {
				p.HDel(ctx, sp.EndpointNames(), name)
			}
		}
		return nil
	})
	if err != nil {
		for k, c := range cmds {
			if c.Err() != nil {
				return errorf("endpoint %q: shard %d of %d: %w; put or delete the endpoint again",
					name, k, len(l.spaces), q.redisError(c.Err()))
			}
		}
		return errorf("endpoint %q: %w", name, q.redisError(err))
	}
	return nil
}

// checkEndpoints refuses, before anything is written, a batch spread over
// several shards in which a timer names an endpoint that does not exist:
// schedule.lua checks the names again, atomically, in each shard, but one
// shard's refusal cannot undo another's writes. It costs one HMGET, and
// only for such a batch; a batch within one shard relies on the script.
func (q *Queue) checkEndpoints(ctx context.Context, l *layout, byShard [][]int, timers []NewTimer) error {
	shards := 0
	for _, idx := range byShard {
		if len(idx) > 0 {
			shards++
		}
	}
	if shards < 2 {
		return nil
	}
	var names []string
	for _, t := range timers {
		if t.Endpoint != "" && !slices.Contains(names, t.Endpoint) {
			names = append(names, t.Endpoint)
		}
	}
	if len(names) == 0 {
		return nil
	}
	vals, err := q.rdb.HMGet(ctx, keyspace.Namespace(q.opts.Namespace).Endpoints(), names...).Result()
	if err != nil {
		return errorf("schedule: check endpoints: %w", q.redisError(err))
	}
	for i, v := range vals {
		if v == nil {
			return errorf("schedule: %w", q.noEndpoint(names[i]))
		}
	}
	return nil
}

// noEndpoint is the error for scheduling a timer to the missing endpoint
// name.
func (q *Queue) noEndpoint(name string) error {
	return fmt.Errorf("%w: %q in namespace %q, so nothing was scheduled; create it first (Endpoints().Put, or PUT /v1/namespaces/%s/endpoints/%s)",
		ErrEndpointNotFound, name, q.opts.Namespace, q.opts.Namespace, name)
}

// endpointNotFound is the error for reading or changing the endpoint name
// the namespace lacks.
func (q *Queue) endpointNotFound(name string) error {
	return fmt.Errorf("%w: %q in namespace %q; check the name, or list the endpoints with Endpoints().List",
		ErrEndpointNotFound, name, q.opts.Namespace)
}

// Get returns the endpoint name, or an error wrapping
// ErrEndpointNotFound.
func (eps Endpoints) Get(ctx context.Context, name string) (Endpoint, error) {
	q := eps.q
	if err := ValidateEndpointName(name); err != nil {
		return Endpoint{}, err
	}
	key := keyspace.Namespace(q.opts.Namespace).Endpoints()
	v, err := q.rdb.HGet(ctx, key, name).Result()
	if errors.Is(err, redis.Nil) {
		return Endpoint{}, q.endpointNotFound(name)
	}
	if err != nil {
		return Endpoint{}, errorf("get endpoint %q: %w", name, q.redisError(err))
	}
	return decodeEndpoint(key, name, v)
}

// List returns every endpoint of the namespace, by name.
func (eps Endpoints) List(ctx context.Context) ([]Endpoint, error) {
	q := eps.q
	key := keyspace.Namespace(q.opts.Namespace).Endpoints()
	m, err := q.rdb.HGetAll(ctx, key).Result()
	if err != nil {
		return nil, errorf("list endpoints: %w", q.redisError(err))
	}
	out := make([]Endpoint, 0, len(m))
	for name, v := range m {
		e, err := decodeEndpoint(key, name, v)
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Delete deletes the endpoint name, or returns an error wrapping
// ErrEndpointNotFound. New timers may no longer name it; timers already
// scheduled to deliver to it keep its name, and a dispatcher dead-letters
// their fires while no endpoint of that name exists.
func (eps Endpoints) Delete(ctx context.Context, name string) error {
	q := eps.q
	if err := ValidateEndpointName(name); err != nil {
		return err
	}
	l, err := q.layout(ctx)
	if err != nil {
		return err
	}
	// The shards' names first, so that no timer is scheduled against an
	// endpoint that is gone.
	if err := q.indexEndpoint(ctx, l, name, false); err != nil {
		return err
	}
	n, err := q.rdb.HDel(ctx, keyspace.Namespace(q.opts.Namespace).Endpoints(), name).Result()
	if err != nil {
		return errorf("delete endpoint %q: %w", name, q.redisError(err))
	}
	if n == 0 {
		return q.endpointNotFound(name)
	}
	return nil
}

// SetEnabled enables or disables the endpoint name and returns it
// as stored. It rewrites the endpoint only if it is unchanged since it was
// read (WATCH), retrying a few times when another writer got there first.
func (eps Endpoints) SetEnabled(ctx context.Context, name string, enabled bool) (Endpoint, error) {
	q := eps.q
	if err := ValidateEndpointName(name); err != nil {
		return Endpoint{}, err
	}
	key := keyspace.Namespace(q.opts.Namespace).Endpoints()
	var out Endpoint
	for range 5 {
		err := q.rdb.Watch(ctx, func(tx *redis.Tx) error {
			v, err := tx.HGet(ctx, key, name).Result()
			if errors.Is(err, redis.Nil) {
				return q.endpointNotFound(name)
			}
			if err != nil {
				return err
			}
			e, err := decodeEndpoint(key, name, v)
			if err != nil {
				return err
			}
			e.Disabled = !enabled
			e.UpdatedAt = time.Now().UTC().Truncate(time.Millisecond)
			nv, err := encodeEndpoint(e)
			if err != nil {
				return err
			}
			if _, err := tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
				p.HSet(ctx, key, name, nv)
				return nil
			}); err != nil {
				return err
			}
			out = e
			return nil
		}, key)
		if errors.Is(err, redis.TxFailedErr) {
			continue
		}
		if err != nil {
			if errors.Is(err, ErrEndpointNotFound) || errors.Is(err, ErrMalformedRecord) {
				return Endpoint{}, err
			}
			return Endpoint{}, errorf("set endpoint %q enabled=%v: %w", name, enabled, q.redisError(err))
		}
		return out, nil
	}
	return Endpoint{}, errorf("set endpoint %q enabled=%v: it kept changing under us; try again", name, enabled)
}
