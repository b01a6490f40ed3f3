package deliver_test

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/timerq/timerq/deliver"
)

// maxJitter draws the top of the range, so each delay is the backoff's
// ceiling; halfJitter draws its middle.
func maxJitter(max time.Duration) time.Duration  { return max }
func halfJitter(max time.Duration) time.Duration { return max / 2 }

func TestDecideTable(t *testing.T) {
	now := time.Date(2026, 12, 4, 21, 0, 0, 0, time.UTC)
	due := now.Add(-time.Second)
	pol := deliver.Policy{MaxAttempts: 5, MaxAge: time.Hour, Base: time.Second, Cap: 10 * time.Second}
	connErr := errors.New("connection refused")
	type want struct {
		out    deliver.Outcome
		reason deliver.Reason
		delay  time.Duration
		cause  deliver.Reason
	}
	for _, tc := range []struct {
		name    string
		pol     deliver.Policy
		attempt int
		due     time.Time
		r       deliver.Result
		want    want
	}{
		{"200", pol, 1, due, deliver.Result{Status: 200}, want{deliver.Delivered, deliver.ReasonOK, 0, ""}},
		{"204 on the last attempt", pol, 5, due, deliver.Result{Status: 204}, want{deliver.Delivered, deliver.ReasonOK, 0, ""}},
		{"299", pol, 1, due, deliver.Result{Status: 299}, want{deliver.Delivered, deliver.ReasonOK, 0, ""}},
		{"500 attempt 1: base", pol, 1, due, deliver.Result{Status: 500}, want{deliver.Retry, deliver.ReasonServerError, time.Second, ""}},
		{"502 attempt 2: 2 base", pol, 2, due, deliver.Result{Status: 502}, want{deliver.Retry, deliver.ReasonServerError, 2 * time.Second, ""}},
		{"504 attempt 4: 8 base", pol, 4, due, deliver.Result{Status: 504}, want{deliver.Retry, deliver.ReasonServerError, 8 * time.Second, ""}},
		{"500 past the cap", deliver.Policy{MaxAttempts: 100, Base: time.Second, Cap: 10 * time.Second}, 9, due, deliver.Result{Status: 500}, want{deliver.Retry, deliver.ReasonServerError, 10 * time.Second, ""}},
		{"500 attempt 80 does not overflow", deliver.Policy{MaxAttempts: 100, Base: time.Second, Cap: time.Minute}, 80, due, deliver.Result{Status: 500}, want{deliver.Retry, deliver.ReasonServerError, time.Minute, ""}},
		{"408", pol, 1, due, deliver.Result{Status: 408}, want{deliver.Retry, deliver.ReasonServerError, time.Second, ""}},
		{"timeout", pol, 2, due, deliver.Result{Err: connErr, Timeout: true}, want{deliver.Retry, deliver.ReasonTimeout, 2 * time.Second, ""}},
		{"connection error", pol, 3, due, deliver.Result{Err: connErr}, want{deliver.Retry, deliver.ReasonConnection, 4 * time.Second, ""}},
		{"429 Retry-After seconds", pol, 1, due, deliver.Result{Status: 429, RetryAfter: "7"}, want{deliver.Retry, deliver.ReasonRetryAfter, 7 * time.Second, ""}},
		{"503 Retry-After date", pol, 1, due, deliver.Result{Status: 503, RetryAfter: now.Add(90 * time.Second).Format(http.TimeFormat)}, want{deliver.Retry, deliver.ReasonRetryAfter, 90 * time.Second, ""}},
		{"503 Retry-After date passed", pol, 1, due, deliver.Result{Status: 503, RetryAfter: now.Add(-time.Minute).Format(http.TimeFormat)}, want{deliver.Retry, deliver.ReasonRetryAfter, 0, ""}},
		{"429 Retry-After above the cap is honoured", pol, 1, due, deliver.Result{Status: 429, RetryAfter: "600"}, want{deliver.Retry, deliver.ReasonRetryAfter, 10 * time.Minute, ""}},
		{"429 without Retry-After", pol, 3, due, deliver.Result{Status: 429}, want{deliver.Retry, deliver.ReasonThrottled, 4 * time.Second, ""}},
		{"503 bad Retry-After", pol, 1, due, deliver.Result{Status: 503, RetryAfter: "soon"}, want{deliver.Retry, deliver.ReasonThrottled, time.Second, ""}},
		{"Retry-After ignored on 500", pol, 1, due, deliver.Result{Status: 500, RetryAfter: "30"}, want{deliver.Retry, deliver.ReasonServerError, time.Second, ""}},
		{"410 stops", pol, 1, due, deliver.Result{Status: 410}, want{deliver.DeadLetter, deliver.ReasonGone, 0, ""}},
		{"410 stops even when 4xx retry", deliver.Policy{RetryClientErrors: true}, 1, due, deliver.Result{Status: 410}, want{deliver.DeadLetter, deliver.ReasonGone, 0, ""}},
		{"400 dead letter", pol, 1, due, deliver.Result{Status: 400}, want{deliver.DeadLetter, deliver.ReasonClientError, 0, ""}},
		{"404 dead letter", pol, 1, due, deliver.Result{Status: 404}, want{deliver.DeadLetter, deliver.ReasonClientError, 0, ""}},
		{"404 retried when configured", deliver.Policy{Base: time.Second, Cap: time.Minute, RetryClientErrors: true}, 2, due, deliver.Result{Status: 404}, want{deliver.Retry, deliver.ReasonClientError, 2 * time.Second, ""}},
		{"302 not followed", pol, 1, due, deliver.Result{Status: 302}, want{deliver.DeadLetter, deliver.ReasonRedirect, 0, ""}},
		{"refused by the guard", pol, 1, due, deliver.Result{Err: deliver.ErrRefused, Refused: true}, want{deliver.DeadLetter, deliver.ReasonRefused, 0, ""}},
		{"last attempt 500", pol, 5, due, deliver.Result{Status: 500}, want{deliver.DeadLetter, deliver.ReasonExhausted, 0, deliver.ReasonServerError}},
		{"last attempt timeout", pol, 5, due, deliver.Result{Err: connErr, Timeout: true}, want{deliver.DeadLetter, deliver.ReasonExhausted, 0, deliver.ReasonTimeout}},
		{"last attempt 429", pol, 5, due, deliver.Result{Status: 429, RetryAfter: "1"}, want{deliver.DeadLetter, deliver.ReasonExhausted, 0, deliver.ReasonRetryAfter}},
		{"past max age", pol, 2, now.Add(-time.Hour + time.Second), deliver.Result{Status: 500}, want{deliver.DeadLetter, deliver.ReasonExpired, 0, deliver.ReasonServerError}},
		{"just within max age", pol, 2, now.Add(-time.Hour + 2*time.Second), deliver.Result{Status: 500}, want{deliver.Retry, deliver.ReasonServerError, 2 * time.Second, ""}},
		{"Retry-After past max age", pol, 1, due, deliver.Result{Status: 503, RetryAfter: "3600"}, want{deliver.DeadLetter, deliver.ReasonExpired, 0, deliver.ReasonRetryAfter}},
		{"defaults: 10 attempts", deliver.Policy{}, 9, due, deliver.Result{Status: 500}, want{deliver.Retry, deliver.ReasonServerError, 256 * time.Second, ""}},
		{"defaults: 10th is the last", deliver.Policy{}, 10, due, deliver.Result{Status: 500}, want{deliver.DeadLetter, deliver.ReasonExhausted, 0, deliver.ReasonServerError}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.r
			r.At = now
			d := deliver.Decide(tc.pol, tc.attempt, tc.due, r, maxJitter)
			got := want{d.Outcome, d.Reason, d.Delay, d.Cause}
			if got != tc.want {
				t.Fatalf("Decide = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// Full jitter: the delay is drawn from [0, ceiling], not added to it.
func TestDecideJitterIsFull(t *testing.T) {
	pol := deliver.Policy{Base: time.Second, Cap: time.Minute}
	r := deliver.Result{Status: 500, At: time.Now()}
	if d := deliver.Decide(pol, 3, time.Time{}, r, halfJitter); d.Delay != 2*time.Second {
		t.Fatalf("half jitter of a 4 s ceiling = %v, want 2s", d.Delay)
	}
	// The default source stays within [0, ceiling] and varies.
	seen := map[time.Duration]bool{}
	for range 200 {
		d := deliver.Decide(pol, 3, time.Time{}, r, nil)
		if d.Delay < 0 || d.Delay > 4*time.Second {
			t.Fatalf("delay %v outside [0, 4s]", d.Delay)
		}
		seen[d.Delay] = true
	}
	if len(seen) < 50 {
		t.Fatalf("200 draws gave %d distinct delays: no jitter", len(seen))
	}
	// A jitter function that misbehaves is clamped to the range.
	if d := deliver.Decide(pol, 3, time.Time{}, r, func(time.Duration) time.Duration { return time.Hour }); d.Delay != 4*time.Second {
		t.Fatalf("an out-of-range draw gave %v", d.Delay)
	}
}

func TestPolicyWithDefaults(t *testing.T) {
	p, err := deliver.Policy{}.WithDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if p.MaxAttempts != deliver.DefaultMaxAttempts || p.MaxAge != deliver.DefaultMaxAge || p.Base != deliver.DefaultBackoffBase || p.Cap != deliver.DefaultBackoffCap {
		t.Fatalf("defaults = %+v", p)
	}
	for _, bad := range []deliver.Policy{
		{MaxAttempts: -1}, {MaxAge: -1}, {Base: -1}, {Cap: -1},
		{MaxAttempts: deliver.MaxPolicyAttempts + 1},
		{Base: time.Minute, Cap: time.Second},
	} {
		if _, err := bad.WithDefaults(); !errors.Is(err, deliver.ErrInvalidPolicy) {
			t.Errorf("%+v: err = %v, want ErrInvalidPolicy", bad, err)
		}
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 12, 4, 21, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		v  string
		d  time.Duration
		ok bool
	}{
		{"0", 0, true},
		{" 120 ", 2 * time.Minute, true},
		{now.Add(time.Hour).Format(http.TimeFormat), time.Hour, true},
		{"Fri, 04 Dec 2026 20:00:00 GMT", 0, true},
		{"99999999999999", 365 * 24 * time.Hour, true},
		{"", 0, false},
		{"-5", 0, false},
		{"1.5", 0, false},
		{"tomorrow", 0, false},
	} {
		d, ok := deliver.ParseRetryAfter(tc.v, now)
		if d != tc.d || ok != tc.ok {
			t.Errorf("ParseRetryAfter(%q) = %v, %v; want %v, %v", tc.v, d, ok, tc.d, tc.ok)
		}
	}
}
