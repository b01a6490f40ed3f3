package ui_test

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/queue"
	"github.com/timerq/timerq/ui"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// chromedp's allocator and the http test server's keep-alive
		// connections end asynchronously after Close.
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
	)
}

// env is a dashboard over a fresh namespace.
type env struct {
	q   *queue.Queue
	srv *httptest.Server
	c   *http.Client
}

func newEnv(t *testing.T, b *redistest.Backend, opts ui.Options) *env {
	t.Helper()
	q, err := queue.New(b.Client, queue.Options{Namespace: redistest.Namespace(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Close() })
	h, err := ui.New(q, opts)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle(opts.Prefix+"/", h)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, Timeout: 10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	t.Cleanup(c.CloseIdleConnections)
	return &env{q: q, srv: srv, c: c}
}

func (e *env) get(t *testing.T, path string) (*http.Response, string) {
	t.Helper()
	resp, err := e.c.Get(e.srv.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func (e *env) post(t *testing.T, path string, form url.Values, hdr map[string]string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", e.srv.URL+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := e.c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

var csrfField = regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`)

func schedule(t *testing.T, q *queue.Queue, id string, in time.Duration, payload string) {
	t.Helper()
	if _, err := q.Schedule(context.Background(), id, time.Now().Add(in), []byte(payload)); err != nil {
		t.Fatal(err)
	}
}

// TestPagesAndHeaders: every page renders under the prefix with the strict
// security headers, and shows the namespace's numbers.
func TestPagesAndHeaders(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		e := newEnv(t, b, ui.Options{Prefix: "/ops/timerq"})
		schedule(t, e.q, "late-1", -time.Minute, "x")
		schedule(t, e.q, "soon-1", 30*time.Second, "y")
		schedule(t, e.q, "later-1", 2*time.Hour, "z")
		for _, p := range []string{"/", "/timers", "/timer?id=soon-1", "/tail", "/groups"} {
			resp, body := e.get(t, "/ops/timerq"+p)
			if resp.StatusCode != 200 {
				t.Fatalf("GET %s = %d\n%s", p, resp.StatusCode, body)
			}
			csp := resp.Header.Get("Content-Security-Policy")
			if !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe-inline") || !strings.Contains(csp, "default-src 'none'") {
				t.Errorf("GET %s: CSP %q is not strict", p, csp)
			}
			if resp.Header.Get("X-Frame-Options") != "DENY" || resp.Header.Get("X-Content-Type-Options") != "nosniff" {
				t.Errorf("GET %s: missing frame or sniffing protection: %v", p, resp.Header)
			}
			if strings.Contains(body, "<script>") || strings.Contains(body, " style=") {
				t.Errorf("GET %s has inline script or style", p)
			}
			if !strings.Contains(body, `src="/ops/timerq/static/app.js"`) {
				t.Errorf("GET %s does not load the script under the prefix", p)
			}
		}
		_, body := e.get(t, "/ops/timerq/")
		for _, want := range []string{`id="count-scheduled">3<`, `id="count-overdue">1<`, ">overdue<"} {
			if !strings.Contains(body, want) {
				t.Errorf("overview lacks %q", want)
			}
		}
		if resp, _ := e.get(t, "/ops/timerq/static/app.js"); resp.StatusCode != 200 || !strings.Contains(resp.Header.Get("Content-Type"), "javascript") {
			t.Errorf("app.js: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		if resp, _ := e.get(t, "/ops/timerq/timer?id=nope"); resp.StatusCode != 404 {
			t.Errorf("unknown timer: %d, want 404", resp.StatusCode)
		}
	})
}

// TestReadOnly: the zero Options hide every action and refuse every POST,
// even one carrying a valid token from a writable dashboard.
func TestReadOnly(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		e := newEnv(t, b, ui.Options{})
		schedule(t, e.q, "ro-1", time.Hour, "")
		_, body := e.get(t, "/timer?id=ro-1")
		if strings.Contains(body, "action-cancel") || strings.Contains(body, "Cancel…") || strings.Contains(body, `name="csrf"`) {
			t.Errorf("read-only timer page offers actions:\n%s", body)
		}
		if !strings.Contains(body, `id="read-only"`) {
			t.Error("read-only page does not say so")
		}
		if resp, _ := e.get(t, "/timer/confirm?id=ro-1&action=cancel"); resp.StatusCode != 403 {
			t.Errorf("confirm page in read-only mode: %d, want 403", resp.StatusCode)
		}
		for _, p := range []string{"/timer/cancel", "/timer/fire", "/timer/reschedule", "/dead/requeue"} {
			resp, body := e.post(t, p, url.Values{"id": {"ro-1"}, "csrf": {"x"}, "due": {"1"}}, nil)
			if resp.StatusCode != 403 || !strings.Contains(body, "this dashboard is read-only") {
				t.Errorf("POST %s in read-only mode: %d, want 403 saying read-only:\n%s", p, resp.StatusCode, body)
			}
		}
		if tm, _ := e.q.Get(context.Background(), "ro-1"); tm.State != queue.StateScheduled {
			t.Errorf("timer is %s after refused POSTs", tm.State)
		}
	})
}

// TestCSRF: a POST needs the token of the browser's own session and must
// not come from another origin.
func TestCSRF(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		e := newEnv(t, b, ui.Options{AllowWrites: true})
		schedule(t, e.q, "c-1", time.Hour, "")
		_, body := e.get(t, "/timer/confirm?id=c-1&action=cancel")
		m := csrfField.FindStringSubmatch(body)
		if m == nil {
			t.Fatalf("confirm page has no CSRF field:\n%s", body)
		}
		token := m[1]
		for name, tc := range map[string]struct {
			form url.Values
			hdr  map[string]string
		}{
			"no token":     {url.Values{"id": {"c-1"}}, nil},
			"wrong token":  {url.Values{"id": {"c-1"}, "csrf": {strings.Repeat("0", 64)}}, nil},
			"cross-origin": {url.Values{"id": {"c-1"}, "csrf": {token}}, map[string]string{"Sec-Fetch-Site": "cross-site"}},
		} {
			if resp, _ := e.post(t, "/timer/cancel", tc.form, tc.hdr); resp.StatusCode != 403 {
				t.Errorf("%s: POST = %d, want 403", name, resp.StatusCode)
			}
		}
		// Another browser (a fresh cookie jar) cannot reuse the token.
		other := *e.c
		other.Jar, _ = cookiejar.New(nil)
		req, _ := http.NewRequest("POST", e.srv.URL+"/timer/cancel", strings.NewReader(url.Values{"id": {"c-1"}, "csrf": {token}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if resp, err := other.Do(req); err != nil || resp.StatusCode != 403 {
			t.Errorf("token without its cookie: %v %v, want 403", resp.StatusCode, err)
		} else {
			resp.Body.Close()
		}
		if tm, _ := e.q.Get(context.Background(), "c-1"); tm.State != queue.StateScheduled {
			t.Fatalf("timer is %s after forged POSTs", tm.State)
		}
		resp, _ := e.post(t, "/timer/cancel", url.Values{"id": {"c-1"}, "csrf": {token}}, map[string]string{"Sec-Fetch-Site": "same-origin"})
		if resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("valid POST = %d, want 303", resp.StatusCode)
		}
		if tm, _ := e.q.Get(context.Background(), "c-1"); tm.State != queue.StateCancelled {
			t.Errorf("timer is %s after a valid cancel", tm.State)
		}
	})
}

// TestEscaping: an ID, payload or error holding markup renders as text.
func TestEscaping(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		e := newEnv(t, b, ui.Options{AllowWrites: true})
		const evil = `<script>alert(1)</script>"'><img src=x onerror=alert(2)>`
		schedule(t, e.q, evil, -time.Second, evil)
		if _, err := e.q.Claim(context.Background(), 10); err != nil {
			t.Fatal(err)
		}
		schedule(t, e.q, evil+"2", time.Hour, evil)
		for _, p := range []string{"/timers", "/timer?id=" + url.QueryEscape(evil), "/timer?id=" + url.QueryEscape(evil+"2"), "/tail",
			"/timers?prefix=" + url.QueryEscape(evil), "/timers?from=" + url.QueryEscape(evil)} {
			_, body := e.get(t, p)
			if strings.Contains(body, "<script>alert") || strings.Contains(body, "<img src=x") {
				t.Errorf("GET %s renders markup from data:\n%s", p, body)
			}
			if !strings.Contains(body, "&lt;script&gt;alert(1)&lt;/script&gt;") {
				t.Errorf("GET %s does not show the ID as text", p)
			}
		}
	})
}
