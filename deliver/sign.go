package deliver

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Signing follows Standard Webhooks (https://www.standardwebhooks.com/),
// symmetric scheme: each request carries webhook-id, webhook-timestamp and
// webhook-signature, where the signature is "v1," followed by the base64
// HMAC-SHA256 of "<webhook-id>.<webhook-timestamp>.<body>" under the
// secret's key. With several active secrets (a rotation) the header holds
// one signature per secret, space separated, and a receiver that knows any
// one of them accepts the request.

// Limits of a signing secret's key, as Standard Webhooks sets them.
const (
	// SecretPrefix starts every secret in its text form: "whsec_" and the
	// key in standard base64.
	SecretPrefix = "whsec_"
	// MinSecretBytes is the shortest key a secret may have (192 bits).
	MinSecretBytes = 24
	// MaxSecretBytes is the longest key a secret may have (512 bits).
	MaxSecretBytes = 64
	// GeneratedSecretBytes is the key length of GenerateSecret.
	GeneratedSecretBytes = 32
)

// ErrBadSignature means Verify found no valid signature of a request by
// any of the secrets given, or its webhook-timestamp is too far from now.
var ErrBadSignature = errors.New("timerq: deliver: webhook signature does not verify")

// VerifyTolerance is how far a request's webhook-timestamp may be from
// the receiver's clock, as Standard Webhooks' libraries allow.
const VerifyTolerance = 5 * time.Minute

// Verify checks a received request as a Standard Webhooks receiver does:
// its webhook-id, webhook-timestamp (within VerifyTolerance of now) and a
// "v1," signature in webhook-signature that one of secrets made over
// body, compared in constant time. It returns nil or an error wrapping
// ErrBadSignature. It is for Go receivers and tests; any Standard
// Webhooks library does the same.
func Verify(h http.Header, body []byte, now time.Time, secrets ...Secret) error {
	get := func(k string) string {
		if v := h.Get(k); v != "" {
			return v
		}
		if vs := h[k]; len(vs) > 0 {
			return vs[0]
		}
		return ""
	}
	id, tsText, sigs := get(HeaderID), get(HeaderTimestamp), get(HeaderSignature)
	if id == "" || tsText == "" || sigs == "" {
		return fmt.Errorf("%w: a webhook-id, webhook-timestamp or webhook-signature header is missing", ErrBadSignature)
	}
	sec, err := strconv.ParseInt(tsText, 10, 64)
	if err != nil {
		return fmt.Errorf("%w: webhook-timestamp %q is not Unix seconds", ErrBadSignature, tsText)
	}
	ts := time.Unix(sec, 0)
	if d := now.Sub(ts); d > VerifyTolerance || d < -VerifyTolerance {
		return fmt.Errorf("%w: webhook-timestamp %s is %v from now", ErrBadSignature, ts.UTC().Format(time.RFC3339), d)
	}
	for _, s := range secrets {
		want := Sign(id, ts, body, s)
		for _, got := range strings.Fields(sigs) {
			if hmac.Equal([]byte(got), []byte(want)) {
				return nil
			}
		}
	}
	return fmt.Errorf("%w: none of the %d signatures matches any of the %d secrets", ErrBadSignature, len(strings.Fields(sigs)), len(secrets))
}

// ErrInvalidSecret means a signing secret is not "whsec_" followed by the
// standard base64 of a key of MinSecretBytes..MaxSecretBytes bytes.
var ErrInvalidSecret = errors.New("timerq: deliver: invalid signing secret")

// Secret is a parsed signing secret. Its key is never printed: String and
// the fmt verbs show only a redacted form.
type Secret struct {
	key  []byte
	text string
	macs *sync.Pool // of *mac under key; nil in a zero Secret
}

// ParseSecret reads a secret in its text form, "whsec_<base64 key>". A key
// shorter than MinSecretBytes or longer than MaxSecretBytes, a missing
// prefix or bad base64 is refused with an error wrapping ErrInvalidSecret
// that never repeats the secret.
func ParseSecret(s string) (Secret, error) {
	const want = "use \"whsec_\" and the standard base64 of 24-64 random bytes (GenerateSecret makes one)"
	b64, ok := strings.CutPrefix(s, SecretPrefix)
	if !ok {
		return Secret{}, fmt.Errorf("%w: it does not start with %q; %s", ErrInvalidSecret, SecretPrefix, want)
	}
	key, err := base64.StdEncoding.Strict().DecodeString(b64)
	if err != nil {
		return Secret{}, fmt.Errorf("%w: what follows %q is not standard base64; %s", ErrInvalidSecret, SecretPrefix, want)
	}
	if len(key) < MinSecretBytes || len(key) > MaxSecretBytes {
		return Secret{}, fmt.Errorf("%w: its key is %d bytes; %s", ErrInvalidSecret, len(key), want)
	}
	return Secret{key: key, text: s, macs: &sync.Pool{New: func() any { return &mac{h: hmac.New(sha256.New, key)} }}}, nil
}

// GenerateSecret returns a new random secret in its text form, with a key
// of GeneratedSecretBytes bytes from crypto/rand.
func GenerateSecret() string {
	key := make([]byte, GeneratedSecretBytes)
	rand.Read(key) // never fails (crypto/rand)
	return SecretPrefix + base64.StdEncoding.EncodeToString(key)
}

// Text returns the secret in its full text form, "whsec_…", for storing
// it. Never log it; String is the form to show.
func (s Secret) Text() string { return s.text }

// String is the secret redacted: RedactSecret of its text.
func (s Secret) String() string { return RedactSecret(s.text) }

// GoString is String, so that %#v does not print the key either.
func (s Secret) GoString() string { return s.String() }

// RedactSecret shows a secret's text form the way timerq prints secrets
// back: the prefix, the first 4 characters of the key and "…", enough to
// tell two secrets apart and too little to sign with. Anything that is not
// a secret's text is redacted whole.
func RedactSecret(s string) string {
	b64, ok := strings.CutPrefix(s, SecretPrefix)
	if !ok || len(b64) < 8 {
		return SecretPrefix + "…"
	}
	return SecretPrefix + b64[:4] + "…"
}

// Sign returns the webhook-signature header value for a request with
// webhook-id id, webhook-timestamp ts (whole seconds) and body body: one
// "v1,<base64 HMAC-SHA256>" per secret, space separated, in the order
// given. With no secrets it returns "".
func Sign(id string, ts time.Time, body []byte, secrets ...Secret) string {
	if len(secrets) == 0 {
		return ""
	}
	return string(appendSignature(nil, []byte(id), ts.Unix(), body, secrets))
}

// appendSignature appends Sign's value to dst. id may alias dst: it is
// read before dst grows.
func appendSignature(dst, id []byte, ts int64, body []byte, secrets []Secret) []byte {
	for i, s := range secrets {
		m := s.getMAC()
		m.buf = append(append(append(append(m.buf[:0], id...), '.'), strconv.AppendInt(m.num[:0], ts, 10)...), '.')
		m.h.Write(m.buf)
		m.h.Write(body)
		sum := m.h.Sum(m.sum[:0])
		if i > 0 {
			dst = append(dst, ' ')
		}
		dst = append(dst, "v1,"...)
		dst = base64.StdEncoding.AppendEncode(dst, sum)
		s.putMAC(m)
	}
	return dst
}

// mac is an HMAC-SHA256 under one secret's key with its scratch space.
// Each Secret that ParseSecret made keeps a pool of them: a request's
// signature then costs no allocation and no hashing of the key's pads
// (an HMAC that was used once resets to its keyed state from a copy).
type mac struct {
	h   hash.Hash
	sum [sha256.Size]byte
	num [20]byte
	buf []byte
}

func (s Secret) getMAC() *mac {
	if s.macs == nil {
		return &mac{h: hmac.New(sha256.New, s.key)}
	}
	m := s.macs.Get().(*mac)
	m.h.Reset()
	return m
}

func (s Secret) putMAC(m *mac) {
	if s.macs != nil && cap(m.buf) <= 1<<10 {
		s.macs.Put(m)
	}
}

// MessageID is the webhook-id of one fire: "msg_" and 32 characters of
// unpadded base64url of a SHA-256 over the namespace, the timer ID and the
// due time in milliseconds. Every attempt of a fire, by any dispatcher,
// carries the same ID, and so does a redriven dead letter, so receivers
// can deduplicate by it. Another fire of the same timer (a reschedule to
// another due time, the next occurrence of a schedule) has another ID. It
// holds no '.', as Standard Webhooks requires, whatever the timer ID holds.
func MessageID(namespace, timerID string, due time.Time) string {
	return string(appendMessageID(nil, namespace, timerID, due))
}

// appendMessageID appends MessageID's value to dst, using dst's spare
// room for the hash's input.
func appendMessageID(dst []byte, namespace, timerID string, due time.Time) []byte {
	start := len(dst)
	in := append(append(append(append(dst, namespace...), 0), timerID...), 0)
	in = strconv.AppendInt(in, due.UnixMilli(), 10)
	sum := sha256.Sum256(in[start:])
	dst = append(in[:start], "msg_"...)
	return base64.RawURLEncoding.AppendEncode(dst, sum[:])[:start+len("msg_")+32]
}
