package ui_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/internal/uitest"
	"github.com/timerq/timerq/queue"
	"github.com/timerq/timerq/ui"
)

// TestActionsWhateverThePathSpelling: the dashboard guards its actions in
// the handlers its mux routes to (post, writeOnly), never by reading the
// path apart, so no spelling of an action's path (a letter
// percent-encoded, case changed, ";", "//", "/./", "/../", "%2F") gets
// past them. In a read-only dashboard every action and confirmation page,
// and in a writable one every action without the session's CSRF token, is
// refused (403) or routed nowhere (404, 405, a redirect to the clean
// path), and nothing is written.
func TestActionsWhateverThePathSpelling(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		const prefix = "/ops/timerq"
		actions := []string{"/timer/cancel", "/timer/fire", "/timer/reschedule", "/dead/requeue",
			"/endpoints/disable", "/endpoints/enable", "/deliveries/redrive",
			"/schedule/pause", "/schedule/resume", "/schedule/delete", "/cancel-jobs/start"}
		confirms := []string{"/timer/confirm", "/dead/confirm", "/endpoints/confirm", "/deliveries/confirm", "/schedule/confirm",
			"/cancel-jobs/confirm"}
		for _, writable := range []bool{false, true} {
			e := newEnv(t, b, ui.Options{Prefix: prefix, AllowWrites: writable})
			ctx := context.Background()
			schedule(t, e.q, "t1", time.Hour, "p")
			if _, err := e.q.Endpoints().Put(ctx, queue.Endpoint{Name: "e1", URL: "https://hooks.example.com/h",
				Secrets: []queue.Secret{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}}, nil); err != nil {
				t.Fatal(err)
			}
			// The session's CSRF cookie, so that a refusal is for want of
			// the form's token, not of the cookie.
			cookie := ""
			if writable {
				if resp, _ := e.Get(t, prefix+"/timer/confirm?id=t1&action=cancel"); resp.StatusCode != 200 {
					t.Fatalf("confirm page of a writable dashboard: %d", resp.StatusCode)
				}
				base, _ := url.Parse(e.URL + prefix + "/")
				for _, c := range e.HTTP.Jar.Cookies(base) {
					cookie = c.Name + "=" + c.Value
				}
				if cookie == "" {
					t.Fatal("no CSRF cookie after a confirm page")
				}
			}
			mode := map[bool]string{false: "read-only", true: "writable"}[writable]
			send := func(method, raw string, form url.Values) int {
				req, err := http.NewRequest(method, e.URL+"/", strings.NewReader(form.Encode()))
				if err != nil {
					t.Fatal(err)
				}
				req.URL.Opaque = raw
				req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
				if cookie != "" {
					req.Header.Set("Cookie", cookie)
				}
				resp, err := e.HTTP.Do(req)
				if err != nil {
					t.Fatalf("%s %s: %v", method, raw, err)
				}
				resp.Body.Close()
				return resp.StatusCode
			}
			before := redistest.Digest(t, b.Client, e.q.Namespace())
			n := 0
			for _, a := range actions {
				form := url.Values{"id": {"t1"}, "due": {"1s"}, "endpoint": {"e1"}, "prefix": {"t"}, "csrf": {strings.Repeat("0", 64)}}
				for _, p := range append([]string{prefix + a}, uitest.Spellings(prefix+a)...) {
					n++
					if code := send("POST", p, form); code/100 == 2 || code == http.StatusSeeOther {
						t.Errorf("%s dashboard: POST %s without the session's CSRF token: %d, want it refused", mode, p, code)
					}
				}
			}
			if !writable {
				for _, c := range confirms {
					for _, p := range append([]string{prefix + c}, uitest.Spellings(prefix+c)...) {
						n++
						if code := send("GET", p+"?id=t1&action=cancel&endpoint=e1&prefix=t", nil); code/100 == 2 {
							t.Errorf("read-only dashboard: GET %s: %d, want it refused", p, code)
						}
					}
				}
			}
			if after := redistest.Digest(t, b.Client, e.q.Namespace()); after != before {
				t.Errorf("%s dashboard: the refused actions wrote:\nbefore:\n%s\nafter:\n%s", mode, before, after)
			}
			t.Logf("%s dashboard: %d spellings refused", mode, n)
		}
	})
}
