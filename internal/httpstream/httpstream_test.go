package httpstream_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/timerq/timerq/internal/httpstream"
)

func from(addr string) *http.Request {
	r := httptest.NewRequest("GET", "/tail", nil)
	r.RemoteAddr = addr
	return r
}

// TestLimiterCaps: a client gets PerClient slots, all clients together
// Total; each refusal names its cap and the setting that raises it; a
// released slot is free again, and releasing twice frees it once.
func TestLimiterCaps(t *testing.T) {
	l, err := httpstream.NewLimiter(httpstream.Limits{What: "live tails", Total: 3, PerClient: 2,
		TotalSetting: "--max-tails", PerClientSetting: "--max-tails-per-client"})
	if err != nil {
		t.Fatal(err)
	}
	a1, err := l.Acquire(from("10.0.0.1:1000"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Acquire(from("10.0.0.1:1001")); err != nil {
		t.Fatal(err)
	}
	_, err = l.Acquire(from("10.0.0.1:1002"))
	var capErr *httpstream.CapError
	if !errors.As(err, &capErr) || !errors.Is(err, httpstream.ErrTooMany) || capErr.Client != "10.0.0.1" ||
		!strings.Contains(err.Error(), "cap per client") || !strings.Contains(err.Error(), "raise --max-tails-per-client") {
		t.Fatalf("third tail of one client: %v; want the per-client cap, naming --max-tails-per-client", err)
	}
	if _, err := l.Acquire(from("10.0.0.2:1000")); err != nil {
		t.Fatalf("another client's first tail: %v", err)
	}
	_, err = l.Acquire(from("10.0.0.3:1000"))
	if !errors.As(err, &capErr) || capErr.Client != "" || !strings.Contains(err.Error(), "total cap") || !strings.Contains(err.Error(), "raise --max-tails") {
		t.Fatalf("fourth tail in all: %v; want the total cap, naming --max-tails", err)
	}
	a1()
	a1() // a second release must not free a slot it does not hold
	if got := l.Held(); got != 2 {
		t.Fatalf("held after one release (called twice) = %d, want 2", got)
	}
	if _, err := l.Acquire(from("10.0.0.3:1000")); err != nil {
		t.Fatalf("a tail after a release: %v", err)
	}
	if _, err := l.Acquire(from("10.0.0.3:1001")); err == nil {
		t.Fatal("the double release freed a second slot")
	}
	w := httptest.NewRecorder()
	l.SetRetryAfter(w.Header())
	if got := w.Header().Get("Retry-After"); got != "5" {
		t.Errorf("Retry-After = %q, want 5 (the default)", got)
	}
}

func TestNewLimiterRefusesZeroCaps(t *testing.T) {
	for _, l := range []httpstream.Limits{{Total: 0, PerClient: 1}, {Total: 1, PerClient: 0}} {
		if _, err := httpstream.NewLimiter(l); err == nil {
			t.Errorf("NewLimiter(%+v) = nil error", l)
		}
	}
}
