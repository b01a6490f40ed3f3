package ui_test

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/queue"
	"github.com/timerq/timerq/ui"
)

// TestOversizedPost: a POST larger than any form the dashboard sends is
// refused with 413 and says why, not as a forbidden or unreadable form, and
// the timer stays as it was.
func TestOversizedPost(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		e := newEnv(t, b, ui.Options{AllowWrites: true})
		schedule(t, e.q, "big-1", time.Hour, "")
		_, body := e.Get(t, "/timer/confirm?id=big-1&action=cancel")
		m := csrfField.FindStringSubmatch(body)
		if m == nil {
			t.Fatalf("confirm page has no CSRF field:\n%s", body)
		}
		form := url.Values{"id": {"big-1"}, "csrf": {m[1]}, "pad": {strings.Repeat("x", 10<<20)}}
		resp, body := e.Post(t, "/timer/cancel", form, map[string]string{"Sec-Fetch-Site": "same-origin"})
		if resp.StatusCode != 413 || !strings.Contains(body, "larger than 64 KiB") || strings.Contains(body, "forbidden") {
			t.Errorf("10 MB POST = %d, want 413 saying the form is too large:\n%s", resp.StatusCode, body)
		}
		if tm, err := e.q.Get(t.Context(), "big-1"); err != nil || tm.State != queue.StateScheduled {
			t.Errorf("timer after the refused POST: %v %v", tm.State, err)
		}
	})
}

// TestStaticServesNoDirectories: the embedded files are served, their
// directory is not listed.
func TestStaticServesNoDirectories(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		e := newEnv(t, b, ui.Options{Prefix: "/p"})
		if resp, _ := e.Get(t, "/p/static/app.css"); resp.StatusCode != 200 {
			t.Errorf("GET /p/static/app.css = %d, want 200", resp.StatusCode)
		}
		for _, p := range []string{"/p/static/", "/p/static/nope/"} {
			resp, body := e.Get(t, p)
			if resp.StatusCode != 404 || strings.Contains(body, `href="app.css"`) {
				t.Errorf("GET %s = %d, want 404 without a listing:\n%s", p, resp.StatusCode, body)
			}
		}
	})
}

// openTail opens a live tail from the local address ip and returns its
// status and, for a refusal, its body and Retry-After; an accepted tail
// stays open until close, or the test's end.
func openTail(t *testing.T, base, ip string) (code int, body, retryAfter string, close func()) {
	t.Helper()
	tr := &http.Transport{DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}).DialContext}
	ctx, cancel := context.WithCancel(context.Background())
	close = func() { cancel(); tr.CloseIdleConnections() }
	t.Cleanup(close)
	req, _ := http.NewRequestWithContext(ctx, "GET", base+"/tail/events", nil)
	resp, err := (&http.Client{Transport: tr, Timeout: 0}).Do(req)
	if err != nil {
		t.Fatalf("tail from %s: %v", ip, err)
	}
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode, string(b), resp.Header.Get("Retry-After"), close
	}
	// Read the stream's first line, so the tail surely holds its slot.
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "retry:") {
		t.Fatalf("tail from %s starts with %q, %v", ip, line, err)
	}
	return 200, "", "", close
}

// TestTailCaps: one client gets MaxTailsPerClient tails, all together
// MaxTails; beyond either a tail is refused with 503, Retry-After and a
// message naming the cap and its setting; a closed tail frees its slot.
func TestTailCaps(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		e := newEnv(t, b, ui.Options{MaxTails: 3, MaxTailsPerClient: 2})
		first := []func(){}
		for range 2 {
			code, body, _, closeTail := openTail(t, e.URL, "127.0.0.1")
			if code != 200 {
				t.Fatalf("tail within the caps = %d: %s", code, body)
			}
			first = append(first, closeTail)
		}
		code, body, retry, _ := openTail(t, e.URL, "127.0.0.1")
		if code != 503 || retry == "" || !strings.Contains(body, "too many live tails from 127.0.0.1") ||
			!strings.Contains(body, "raise ui.Options.MaxTailsPerClient") {
			t.Errorf("third tail of one client = %d (Retry-After %q), want 503 naming the per-client cap:\n%s", code, retry, body)
		}
		if code, body, _, _ := openTail(t, e.URL, "127.0.0.2"); code != 200 {
			t.Fatalf("another client's first tail = %d: %s", code, body)
		}
		code, body, retry, _ = openTail(t, e.URL, "127.0.0.2")
		if code != 503 || retry == "" || !strings.Contains(body, "over all clients") || !strings.Contains(body, "raise ui.Options.MaxTails") {
			t.Errorf("fourth tail in all = %d (Retry-After %q), want 503 naming the total cap:\n%s", code, retry, body)
		}
		if resp, _ := e.Get(t, "/"); resp.StatusCode != 200 {
			t.Errorf("GET / with every tail taken = %d", resp.StatusCode)
		}
		first[0]()
		redistest.Eventually(t, 5*time.Second, "a closed tail to free its slot", func() bool {
			code, _, _, closeTail := openTail(t, e.URL, "127.0.0.1")
			closeTail()
			return code == 200
		})
	})
}
