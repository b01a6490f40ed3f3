package ui_test

import (
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
