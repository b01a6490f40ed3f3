package ui_test

import (
	"context"
	"fmt"
	"html"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/internal/uitest"
	"github.com/timerq/timerq/queue"
	"github.com/timerq/timerq/ui"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(redistest.Shared(m),
		// chromedp's allocator and the http test server's keep-alive
		// connections end asynchronously after Close.
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
	)
}

// env is a dashboard over a fresh namespace, served over HTTP.
type env struct {
	q *queue.Queue
	*uitest.Client
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
	return &env{q: q, Client: uitest.Serve(t, h, opts.Prefix)}
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
			resp, body := e.Get(t, "/ops/timerq"+p)
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
		_, body := e.Get(t, "/ops/timerq/")
		for _, want := range []string{`id="count-scheduled">3<`, `id="count-overdue">1<`, ">overdue<"} {
			if !strings.Contains(body, want) {
				t.Errorf("overview lacks %q", want)
			}
		}
		if resp, _ := e.Get(t, "/ops/timerq/static/app.js"); resp.StatusCode != 200 || !strings.Contains(resp.Header.Get("Content-Type"), "javascript") {
			t.Errorf("app.js: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		if resp, _ := e.Get(t, "/ops/timerq/timer?id=nope"); resp.StatusCode != 404 {
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
		_, body := e.Get(t, "/timer?id=ro-1")
		if strings.Contains(body, "action-cancel") || strings.Contains(body, "Cancel…") || strings.Contains(body, `name="csrf"`) {
			t.Errorf("read-only timer page offers actions:\n%s", body)
		}
		if !strings.Contains(body, `id="read-only"`) {
			t.Error("read-only page does not say so")
		}
		if resp, _ := e.Get(t, "/timer/confirm?id=ro-1&action=cancel"); resp.StatusCode != 403 {
			t.Errorf("confirm page in read-only mode: %d, want 403", resp.StatusCode)
		}
		for _, p := range []string{"/timer/cancel", "/timer/fire", "/timer/reschedule", "/dead/requeue"} {
			resp, body := e.Post(t, p, url.Values{"id": {"ro-1"}, "csrf": {"x"}, "due": {"1"}}, nil)
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
		_, body := e.Get(t, "/timer/confirm?id=c-1&action=cancel")
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
			if resp, _ := e.Post(t, "/timer/cancel", tc.form, tc.hdr); resp.StatusCode != 403 {
				t.Errorf("%s: POST = %d, want 403", name, resp.StatusCode)
			}
		}
		// Another browser (a fresh cookie jar) cannot reuse the token.
		other := *e.HTTP
		other.Jar, _ = cookiejar.New(nil)
		req, _ := http.NewRequest("POST", e.URL+"/timer/cancel", strings.NewReader(url.Values{"id": {"c-1"}, "csrf": {token}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if resp, err := other.Do(req); err != nil || resp.StatusCode != 403 {
			t.Errorf("token without its cookie: %v %v, want 403", resp.StatusCode, err)
		} else {
			resp.Body.Close()
		}
		if tm, _ := e.q.Get(context.Background(), "c-1"); tm.State != queue.StateScheduled {
			t.Fatalf("timer is %s after forged POSTs", tm.State)
		}
		resp, _ := e.Post(t, "/timer/cancel", url.Values{"id": {"c-1"}, "csrf": {token}}, map[string]string{"Sec-Fetch-Site": "same-origin"})
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
		if _, err := e.q.Engine().Claim(context.Background(), 10); err != nil {
			t.Fatal(err)
		}
		schedule(t, e.q, evil+"2", time.Hour, evil)
		for _, p := range []string{"/timers", "/timer?id=" + url.QueryEscape(evil), "/timer?id=" + url.QueryEscape(evil+"2"), "/tail",
			"/timers?prefix=" + url.QueryEscape(evil), "/timers?from=" + url.QueryEscape(evil)} {
			_, body := e.Get(t, p)
			if strings.Contains(body, "<script>alert") || strings.Contains(body, "<img src=x") {
				t.Errorf("GET %s renders markup from data:\n%s", p, body)
			}
			if !strings.Contains(body, "&lt;script&gt;alert(1)&lt;/script&gt;") {
				t.Errorf("GET %s does not show the ID as text", p)
			}
		}
	})
}

// TestActions: fire-now, reschedule and requeue through their confirmation
// pages change Redis, and an action on a settled timer says why it failed.
func TestActions(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		e := newEnv(t, b, ui.Options{AllowWrites: true})
		schedule(t, e.q, "f-1", time.Hour, "")
		schedule(t, e.q, "r-1", time.Hour, "")

		resp, _ := e.Act(t, "/timer/confirm?id=f-1&action=fire")
		if resp.StatusCode != http.StatusSeeOther || !strings.Contains(resp.Header.Get("Location"), "done=fired") {
			t.Fatalf("fire: %d %s", resp.StatusCode, resp.Header.Get("Location"))
		}
		if tm, _ := e.q.Get(ctx, "f-1"); !tm.Due.Before(time.Now().Add(time.Minute)) {
			t.Errorf("fire-now left f-1 due at %v", tm.Due)
		}
		if res, _ := e.q.Engine().Claim(ctx, 10); len(res.Fired) != 1 || res.Fired[0].ID != "f-1" {
			t.Errorf("claim after fire-now = %+v", res.Fired)
		}

		want := time.Date(2031, 5, 6, 7, 8, 9, 0, time.UTC)
		resp, _ = e.Act(t, "/timer/confirm?id=r-1&action=reschedule&due=2031-05-06T07:08:09Z")
		if resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("reschedule: %d", resp.StatusCode)
		}
		if tm, _ := e.q.Get(ctx, "r-1"); !tm.Due.Equal(want) {
			t.Errorf("r-1 due %v, want %v", tm.Due, want)
		}

		// f-1 has fired: cancelling it is a conflict, shown as such.
		resp, body := e.Act(t, "/timer/confirm?id=f-1&action=cancel")
		if resp.StatusCode != http.StatusConflict || !strings.Contains(body, "fired") {
			t.Errorf("cancel of a fired timer: %d\n%s", resp.StatusCode, body)
		}

		// A dead letter is listed and requeued.
		if err := b.Client.XAdd(ctx, &redis.XAddArgs{Stream: e.q.Keys().DeadLetter(0), Values: []any{
			"id", "f-1", "due", "1", "fired", "2", "payload", "", "error", "handler <b>broke</b>", "attempts", "5", "group", "billing", "consumer", "c1", "stream_id", "1-0",
		}}).Err(); err != nil {
			t.Fatal(err)
		}
		_, body = e.Get(t, "/groups")
		link := regexp.MustCompile(`href="(/dead/confirm\?id=[0-9-]+)"`).FindStringSubmatch(body)
		if link == nil || !strings.Contains(body, "handler &lt;b&gt;broke&lt;/b&gt;") {
			t.Fatalf("groups page lacks the dead letter or escapes badly:\n%s", body)
		}
		resp, _ = e.Act(t, html.UnescapeString(link[1]))
		if resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("requeue: %d", resp.StatusCode)
		}
		if n, _ := e.q.Deliveries().DeadLetterCount(ctx); n != 0 {
			t.Errorf("%d dead letters after requeue", n)
		}
		evs, _, _ := e.q.Inspect().RecentFires(ctx, 1)
		if len(evs) != 1 || evs[0].ID != "f-1" {
			t.Errorf("newest fire stream entry = %+v, want the requeued f-1", evs)
		}
	})
}

// TestPrefixFilterIsBounded: an ID prefix is matched within at most the
// budget of timers per page, with a cursor to go on, while an exact ID is
// found at once wherever it is due.
func TestPrefixFilterIsBounded(t *testing.T) {
	_, rdb := redistest.Mini(t)
	b := &redistest.Backend{Name: "mini", Client: rdb}
	// The page examines 5,000 timers in one script. miniredis runs it in
	// a Go Lua interpreter, which under -race on a loaded 2-core machine
	// took longer than the 5 s DefaultTimeout meant for real Redis, and
	// the page answered 502. What is under test is the budget, not speed.
	e := newEnv(t, b, ui.Options{Timeout: time.Minute})
	var batch []queue.NewTimer
	now := time.Now()
	for i := range 6000 {
		batch = append(batch, queue.NewTimer{ID: fmt.Sprintf("bulk-%05d", i), Due: now.Add(time.Duration(i) * time.Second)})
	}
	batch = append(batch, queue.NewTimer{ID: "needle-1", Due: now.Add(48 * time.Hour)})
	if _, err := e.q.ScheduleBatch(context.Background(), batch); err != nil {
		t.Fatal(err)
	}
	_, body := e.Get(t, "/timers?prefix=needle-")
	if !strings.Contains(body, "(5000 examined here)") || !strings.Contains(body, `id="next-page"`) || strings.Contains(body, ">needle-1<") {
		t.Fatalf("first prefix page should examine 5000 timers, find nothing and offer Next:\n%s", body)
	}
	next := html.UnescapeString(regexp.MustCompile(`href="([^"]+)" id="next-page"`).FindStringSubmatch(body)[1])
	_, body = e.Get(t, next)
	if !strings.Contains(body, ">needle-1<") || strings.Contains(body, `id="next-page"`) {
		t.Errorf("second prefix page should find needle-1 and end:\n%s", body)
	}
	_, body = e.Get(t, "/timers?prefix=needle-1")
	if !strings.Contains(body, `Exact match: <a href="/timer?id=needle-1"`) {
		t.Errorf("an exact ID is not found at once:\n%s", body)
	}
}
