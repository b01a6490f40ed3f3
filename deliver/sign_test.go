package deliver_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/timerq/timerq/deliver"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The published Standard Webhooks test vector: a receiver's library
// verifies what Sign writes only if it reproduces this exactly.
func TestSignMatchesTheStandardWebhooksVector(t *testing.T) {
	s, err := deliver.ParseSecret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	if err != nil {
		t.Fatal(err)
	}
	got := deliver.Sign("msg_p5jXN8AQM9LWM0D4loKWxJek", time.Unix(1614265330, 0), []byte(`{"test": 2432232314}`), s)
	if want := "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="; got != want {
		t.Fatalf("Sign = %q, want %q", got, want)
	}
}

func TestSignOnePerSecretSpaceSeparated(t *testing.T) {
	a, _ := deliver.ParseSecret(deliver.GenerateSecret())
	b, _ := deliver.ParseSecret(deliver.GenerateSecret())
	ts, body := time.Unix(1700000000, 0), []byte("x")
	both := deliver.Sign("msg_1", ts, body, a, b)
	want := deliver.Sign("msg_1", ts, body, a) + " " + deliver.Sign("msg_1", ts, body, b)
	if both != want {
		t.Fatalf("Sign(a, b) = %q, want %q", both, want)
	}
	if deliver.Sign("msg_1", ts, body) != "" {
		t.Fatal("Sign without secrets is not empty")
	}
	if deliver.Sign("msg_1", ts, []byte("y"), a) == deliver.Sign("msg_1", ts, body, a) {
		t.Fatal("the body is not signed")
	}
}

func TestParseSecretRefusals(t *testing.T) {
	key := func(n int) string { return "whsec_" + base64.StdEncoding.EncodeToString(make([]byte, n)) }
	for _, tc := range []struct {
		name, s string
		ok      bool
	}{
		{"min", key(deliver.MinSecretBytes), true},
		{"max", key(deliver.MaxSecretBytes), true},
		{"generated", deliver.GenerateSecret(), true},
		{"too short", key(deliver.MinSecretBytes - 1), false},
		{"too long", key(deliver.MaxSecretBytes + 1), false},
		{"no prefix", strings.TrimPrefix(key(32), "whsec_"), false},
		{"not base64", "whsec_" + strings.Repeat("!", 40), false},
		{"empty", "", false},
	} {
		_, err := deliver.ParseSecret(tc.s)
		if tc.ok != (err == nil) {
			t.Errorf("%s: ParseSecret(%q) err = %v, want ok=%v", tc.name, tc.s, err, tc.ok)
		}
		if err != nil && !errors.Is(err, deliver.ErrInvalidSecret) {
			t.Errorf("%s: %v does not wrap ErrInvalidSecret", tc.name, err)
		}
		if err != nil && len(tc.s) > 12 && strings.Contains(err.Error(), tc.s[6:]) {
			t.Errorf("%s: the error repeats the secret: %v", tc.name, err)
		}
	}
}

func TestSecretNeverPrintsItsKey(t *testing.T) {
	text := deliver.GenerateSecret()
	s, err := deliver.ParseSecret(text)
	if err != nil {
		t.Fatal(err)
	}
	if s.Text() != text {
		t.Fatalf("Text() = %q, want %q", s.Text(), text)
	}
	key := strings.TrimPrefix(text, "whsec_")
	for _, out := range []string{s.String(), fmt.Sprint(s), fmt.Sprintf("%v %+v %#v", s, s, s), fmt.Sprintf("%v", []deliver.Secret{s})} {
		if strings.Contains(out, key[:8]) {
			t.Fatalf("%q shows the key", out)
		}
		if !strings.HasPrefix(strings.TrimLeft(out, "["), "whsec_"+key[:4]) {
			t.Fatalf("%q does not show the redacted form", out)
		}
	}
}

func TestMessageIDStableAndDotFree(t *testing.T) {
	due := time.UnixMilli(1700000000123)
	id := deliver.MessageID("ns", "a.b.c", due)
	if id != deliver.MessageID("ns", "a.b.c", due) {
		t.Fatal("MessageID is not deterministic")
	}
	if strings.Contains(id, ".") || !strings.HasPrefix(id, "msg_") || len(id) != 36 {
		t.Fatalf("MessageID = %q: want msg_ and 32 characters without '.'", id)
	}
	for _, other := range []string{
		deliver.MessageID("ns2", "a.b.c", due),
		deliver.MessageID("ns", "a.b.d", due),
		deliver.MessageID("ns", "a.b.c", due.Add(time.Millisecond)),
		deliver.MessageID("n", "s\x00a.b.c", due),
	} {
		if other == id {
			t.Fatalf("another fire has the same ID %q", id)
		}
	}
}

// Verify accepts what Sign makes with any one of the secrets, and refuses
// a tampered body, another secret and an old timestamp.
func TestVerify(t *testing.T) {
	a, _ := deliver.ParseSecret(deliver.GenerateSecret())
	b, _ := deliver.ParseSecret(deliver.GenerateSecret())
	now := time.Unix(1_800_000_000, 0)
	h := http.Header{}
	h.Set(deliver.HeaderID, "msg_x")
	h.Set(deliver.HeaderTimestamp, "1800000000")
	h.Set(deliver.HeaderSignature, deliver.Sign("msg_x", now, []byte("body"), a, b))
	for _, s := range []deliver.Secret{a, b} {
		if err := deliver.Verify(h, []byte("body"), now, s); err != nil {
			t.Errorf("Verify with one of the secrets: %v", err)
		}
	}
	other, _ := deliver.ParseSecret(deliver.GenerateSecret())
	for what, err := range map[string]error{
		"tampered body": deliver.Verify(h, []byte("bodY"), now, a),
		"other secret":  deliver.Verify(h, []byte("body"), now, other),
		"old":           deliver.Verify(h, []byte("body"), now.Add(6*time.Minute), a),
	} {
		if !errors.Is(err, deliver.ErrBadSignature) {
			t.Errorf("%s: %v, want ErrBadSignature", what, err)
		}
	}
}

// Sign and MessageID reuse per-secret HMACs and buffers: every signature
// of a secret used many times, interleaved with another, must still be
// the HMAC of its own input alone, and the webhook-id must stay the hash
// MessageID documents (receivers deduplicate across versions by it).
func TestSignAndMessageIDAgainstPlainHashes(t *testing.T) {
	want := func(key []byte, msg string) string {
		m := hmac.New(sha256.New, key)
		m.Write([]byte(msg))
		return "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
	}
	keyA, keyB := []byte("0123456789abcdef01234567"), []byte("another key of 32 bytes, exactly")
	a, err := deliver.ParseSecret("whsec_" + base64.StdEncoding.EncodeToString(keyA))
	if err != nil {
		t.Fatal(err)
	}
	b, err := deliver.ParseSecret("whsec_" + base64.StdEncoding.EncodeToString(keyB))
	if err != nil {
		t.Fatal(err)
	}
	ts := time.Unix(1700000000, 0)
	for i := range 5 {
		id, body := fmt.Sprintf("msg_%d%s", i, strings.Repeat("x", i*300)), strings.Repeat("b", i*100)
		msg := id + ".1700000000." + body
		if got, w := deliver.Sign(id, ts, []byte(body), a, b), want(keyA, msg)+" "+want(keyB, msg); got != w {
			t.Fatalf("use %d: Sign = %q, want %q", i, got, w)
		}
		if got, w := deliver.Sign(id, ts, []byte(body), b), want(keyB, msg); got != w {
			t.Fatalf("use %d: Sign(b) = %q, want %q", i, got, w)
		}
	}
	// sha256("billing\x00order/42 é\x001614265330123"), base64url, 32 characters.
	if got, w := deliver.MessageID("billing", "order/42 é", time.UnixMilli(1614265330123)), "msg_Nj01cdgAmZJFOXNlR-SfnUu3GShDOeYj"; got != w {
		t.Fatalf("MessageID = %q, want %q", got, w)
	}
}
