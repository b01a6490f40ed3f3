package ui_test

import (
	"context"
	"fmt"
	"html"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/timerq/timerq/deliver/dispatch"
	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/internal/uitest"
	"github.com/timerq/timerq/queue"
	"github.com/timerq/timerq/ui"
)

// Markup where the dashboard shows what endpoints and receivers said.
const (
	evilError = `<script>window.pwned=1</script><img src=x onerror="window.pwned=2">`
	evilURL   = `https://hooks.example.com/in?next="><img src=x onerror=alert(1)>`
)

var testSecrets = []queue.Secret{
	queue.Secret("whsec_" + strings.Repeat("QUFB", 8)),
	queue.Secret("whsec_" + strings.Repeat("QkJC", 10)),
}

// newDeliveryEnv is a dashboard over a fresh namespace of shards shards
// (0 or 1: one) with two endpoints: billing (evilURL, two secrets, a
// credential header, a policy of its own) and audit (disabled, defaults).
func newDeliveryEnv(t *testing.T, b *redistest.Backend, shards int, opts ui.Options) *env {
	t.Helper()
	ctx := context.Background()
	ns := redistest.Namespace(t)
	if shards > 1 {
		if _, err := queue.CreateNamespace(ctx, b.Client, ns, shards); err != nil {
			t.Fatal(err)
		}
	}
	q, err := queue.New(b.Client, queue.Options{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Close() })
	putEndpoints(t, q,
		queue.Endpoint{Name: "billing", URL: evilURL, Secrets: testSecrets, Headers: map[string]string{"Authorization": "Bearer topsecret-header"},
			Timeout: 5 * time.Second, MaxInFlight: 4, Retry: queue.RetryPolicy{MaxAttempts: 3, Base: 2 * time.Second, Cap: time.Minute}},
		queue.Endpoint{Name: "audit", URL: "https://audit.example.com/", Secrets: testSecrets[:1], Disabled: true})
	h, err := ui.New(q, opts)
	if err != nil {
		t.Fatal(err)
	}
	return &env{q: q, Client: uitest.Serve(t, h, opts.Prefix)}
}

func putEndpoints(t *testing.T, q *queue.Queue, eps ...queue.Endpoint) {
	t.Helper()
	for _, e := range eps {
		if _, err := q.Endpoints().Put(context.Background(), e, nil); err != nil {
			t.Fatalf("PutEndpoint %s: %v", e.Name, err)
		}
	}
}

// deliverAndFail fires timers (id -> endpoint), leases them as the
// delivery group and settles each as a dispatcher would after one failed
// attempt: a 500 whose body is evilError, logged; dead-lettered when dead
// holds its ID, released for a retry otherwise.
func deliverAndFail(t *testing.T, q *queue.Queue, timers map[string]string, dead ...string) {
	t.Helper()
	ctx := context.Background()
	var nts []queue.NewTimer
	for id, ep := range timers {
		nts = append(nts, queue.NewTimer{ID: id, Due: time.Now().Add(-time.Second), Endpoint: ep})
	}
	if _, err := q.ScheduleBatch(ctx, nts); err != nil {
		t.Fatal(err)
	}
	if res, err := q.Engine().Claim(ctx, 100); err != nil || len(res.Fired) != len(timers) {
		t.Fatalf("claim = %+v, %v; want %d fired", res, err, len(timers))
	}
	o := queue.LeaseOptions{Lease: time.Minute, Count: 100}
	var ds []queue.Delivery
	redistest.Eventually(t, 10*time.Second, "the fires to be leased", func() bool {
		got, err := q.Lease(ctx, dispatch.DefaultGroup, "d1", o)
		if err != nil {
			t.Fatal(err)
		}
		ds = append(ds, got...)
		return len(ds) == len(timers)
	})
	for _, d := range ds {
		isDead := false
		for _, id := range dead {
			isDead = isDead || id == d.Event.ID
		}
		a := queue.DeliveryAttempt{TimerID: d.Event.ID, Attempt: 1, Due: d.Event.Due, StreamID: d.Event.StreamID,
			At: time.Now(), Latency: 1234 * time.Microsecond, Status: 500, Outcome: "retry", Reason: "server_error",
			Error: evilError, RetryIn: 2 * time.Second}
		ro := queue.ReleaseOptions{Delay: time.Second, Error: "HTTP 500: " + evilError, Log: &a}
		if isDead {
			a.Outcome, a.Reason, a.RetryIn = "dead_letter", "exhausted", 0
			ro = queue.ReleaseOptions{DeadLetter: true, Error: "HTTP 500: " + evilError, Log: &a}
		}
		if _, err := q.Release(ctx, dispatch.DefaultGroup, d.DeliveryID, ro, o); err != nil {
			t.Fatalf("release %s: %v", d.Event.ID, err)
		}
	}
}

// TestEndpointsPage: every endpoint with its URL, state, timeout, retry
// policy and limit; secrets only redacted, as timerctl shows them, and
// header values never; the delivery group's pending count and each
// endpoint's dead letters.
func TestEndpointsPage(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		e := newDeliveryEnv(t, b, 0, ui.Options{})
		if _, body := e.Get(t, "/endpoints"); !strings.Contains(body, "no dispatcher has read the fire stream yet") {
			t.Errorf("before any delivery the page does not say no dispatcher read yet:\n%s", body)
		}
		deliverAndFail(t, e.q, map[string]string{"b-1": "billing", "b-2": "billing", "b-3": "billing", "a-1": "audit"}, "b-1", "b-2")
		resp, body := e.Get(t, "/endpoints")
		if resp.StatusCode != 200 {
			t.Fatalf("GET /endpoints = %d\n%s", resp.StatusCode, body)
		}
		for _, s := range testSecrets {
			if strings.Contains(body, s.Reveal()) || strings.Contains(body, strings.TrimPrefix(s.Reveal(), "whsec_")) {
				t.Errorf("the page shows secret %s whole", s.Redacted())
			}
		}
		if strings.Contains(body, "topsecret-header") {
			t.Error("the page shows a header's value")
		}
		billing, audit := section(t, body, "endpoint-billing"), section(t, body, "endpoint-audit")
		for _, want := range []string{html.EscapeString(evilURL), "enabled", "5s", "attempts: 3<", "max age: 24h0m0s (default)<", "backoff: 2s to 1m0s<",
			"other 4xx: dead-lettered at once", ">4<", html.EscapeString(testSecrets[0].Redacted()), html.EscapeString(testSecrets[1].Redacted()),
			"<code>Authorization: " + html.EscapeString(queue.RedactHeader("Bearer topsecret-header")) + "</code>", ">2</a>"} {
			if !strings.Contains(billing, want) {
				t.Errorf("billing's row lacks %q:\n%s", want, billing)
			}
		}
		for _, want := range []string{"disabled", "30s (default)", "attempts: 10 (default)<", "16 (default)", ">0</a>"} {
			if !strings.Contains(audit, want) {
				t.Errorf("audit's row lacks %q:\n%s", want, audit)
			}
		}
		if strings.Contains(body, "<img src=x") {
			t.Error("the endpoint's URL is rendered as markup")
		}
		// Two fires wait out a retry, leased by the group.
		if !strings.Contains(body, `id="group-pending">2<`) {
			t.Errorf("the delivery group's pending count is not 2:\n%s", body)
		}
	})
}

// TestTimerDeliveryLog: a delivering timer's page names its endpoint and,
// once fired, shows its attempt log: time, status, latency, outcome and
// the error, as text.
func TestTimerDeliveryLog(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		e := newDeliveryEnv(t, b, 0, ui.Options{})
		if _, err := e.q.ScheduleBatch(context.Background(), []queue.NewTimer{{ID: "later", Due: time.Now().Add(time.Hour), Endpoint: "audit"}}); err != nil {
			t.Fatal(err)
		}
		schedule(t, e.q, "plain", time.Hour, "")
		deliverAndFail(t, e.q, map[string]string{"b-1": "billing"})

		_, body := e.Get(t, "/timer?id=later")
		if !strings.Contains(body, `id="timer-endpoint">audit<`) || strings.Contains(body, `id="attempts"`) {
			t.Errorf("a scheduled delivering timer's page does not name audit, or shows attempts:\n%s", body)
		}
		if _, body := e.Get(t, "/timer?id=plain"); strings.Contains(body, "timer-endpoint") || strings.Contains(body, `id="attempts"`) {
			t.Errorf("a timer that does not deliver shows a delivery:\n%s", body)
		}
		_, body = e.Get(t, "/timer?id=b-1")
		if !strings.Contains(body, `id="timer-endpoint">billing<`) {
			t.Errorf("a fired timer's page does not name billing:\n%s", body)
		}
		rows := section(t, body, "attempts")
		for _, want := range []string{"<td>1</td>", "<td>500</td>", "1.2ms", "retry", "server_error", "2s", html.EscapeString(evilError)} {
			if !strings.Contains(rows, want) {
				t.Errorf("the attempt log lacks %q:\n%s", want, rows)
			}
		}
		if strings.Contains(body, "<script>window") || strings.Contains(body, "<img src=x") {
			t.Errorf("an attempt's error is rendered as markup:\n%s", rows)
		}
	})
}

// TestRedriveDeliveries: the dead-lettered deliveries, all or one
// endpoint's, each with its error as text; redriving one puts it back on
// the fire stream for the delivery group, and redriving all of an
// endpoint's leaves the other endpoint's. On a namespace of one shard and
// of three.
func TestRedriveDeliveries(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		for _, shards := range []int{1, 3} {
			t.Run(fmt.Sprint(shards, "shards"), func(t *testing.T) {
				ctx := context.Background()
				e := newDeliveryEnv(t, b, shards, ui.Options{AllowWrites: true})
				// audit's dead one lives in the last shard, so that its
				// redrive names a shard other than 0 on three.
				a1 := "a-1"
				for i := 1; ; i++ {
					a1 = fmt.Sprint("a-", i)
					if k, err := e.q.Inspect().ShardOf(ctx, a1); err != nil || k == shards-1 {
						break
					}
				}
				deliverAndFail(t, e.q, map[string]string{"b-1": "billing", "b-2": "billing", "b-3": "billing", a1: "audit", "a-0": "audit"},
					"b-1", "b-2", "b-3", a1)
				// A dead letter of another group is not a delivery's, though
				// its fire names an endpoint.
				if _, err := e.q.ScheduleBatch(ctx, []queue.NewTimer{{ID: "app-1", Due: time.Now().Add(-time.Second), Endpoint: "billing"}}); err != nil {
					t.Fatal(err)
				}
				if _, err := e.q.Engine().Claim(ctx, 10); err != nil {
					t.Fatal(err)
				}
				redistest.Eventually(t, 10*time.Second, "app-1 to be leased by the app's group", func() bool {
					ds, err := e.q.Lease(ctx, "app", "c", queue.LeaseOptions{Count: 100})
					if err != nil {
						t.Fatal(err)
					}
					for _, d := range ds {
						if d.Event.ID == "app-1" {
							if _, err := e.q.Release(ctx, "app", d.DeliveryID, queue.ReleaseOptions{DeadLetter: true}, queue.LeaseOptions{}); err != nil {
								t.Fatal(err)
							}
							return true
						}
					}
					return false
				})

				_, body := e.Get(t, "/deliveries")
				rows := section(t, body, "deliveries")
				if n := strings.Count(rows, `class="button redrive"`); n != 4 {
					t.Errorf("%d dead-lettered deliveries listed, want 4 (not app-1's):\n%s", n, rows)
				}
				if strings.Contains(rows, "app-1") || !strings.Contains(rows, html.EscapeString(evilError)) || strings.Contains(body, "<img src=x") {
					t.Errorf("the list shows app-1's dead letter, or not the error as text:\n%s", rows)
				}
				_, body = e.Get(t, "/deliveries?endpoint=audit")
				if rows := section(t, body, "deliveries"); !strings.Contains(rows, ">"+a1+"</a>") || strings.Contains(rows, ">b-1</a>") {
					t.Errorf("audit's dead-lettered deliveries:\n%s", rows)
				}

				// Redrive audit's one, by its row's button.
				link := regexpFind(t, body, `href="([^"]*/deliveries/confirm\?[^"]+)"[^>]*>Redrive…`)
				resp, _ := e.Act(t, html.UnescapeString(link))
				if resp.StatusCode != 303 || !strings.Contains(resp.Header.Get("Location"), "done=redriven") {
					t.Fatalf("redrive one = %d %s, want 303 to done=redriven", resp.StatusCode, resp.Header.Get("Location"))
				}
				if _, body := e.Get(t, "/deliveries?endpoint=audit"); strings.Contains(body, `id="deliveries"`) {
					t.Errorf("audit's redriven delivery is still listed:\n%s", body)
				}
				leased := func(want ...string) {
					t.Helper()
					var got []string
					redistest.Eventually(t, 10*time.Second, fmt.Sprint("the group to lease ", want), func() bool {
						ds, err := e.q.Lease(ctx, dispatch.DefaultGroup, "d2", queue.LeaseOptions{Count: 100})
						if err != nil {
							t.Fatal(err)
						}
						for _, d := range ds {
							if d.Event.ID != "b-1" && d.Event.ID != "b-2" && d.Event.ID != "b-3" && d.Event.ID != a1 {
								continue // the released retries coming back
							}
							got = append(got, d.Event.ID)
						}
						return len(got) >= len(want)
					})
					if strings.Join(sorted(got), ",") != strings.Join(want, ",") {
						t.Errorf("the delivery group got %v again, want %v", got, want)
					}
				}
				leased(a1)

				// Redrive all of billing's.
				_, body = e.Get(t, "/deliveries?endpoint=billing")
				resp, _ = e.Act(t, html.UnescapeString(regexpFind(t, body, `id="redrive-all" href="([^"]+)"`)))
				if resp.StatusCode != 303 || !strings.Contains(resp.Header.Get("Location"), "done=redriven-all") {
					t.Fatalf("redrive all = %d %s", resp.StatusCode, resp.Header.Get("Location"))
				}
				leased("b-1", "b-2", "b-3")
				if n, _ := e.q.Deliveries().DeadLetterCount(ctx); n != 1 {
					t.Errorf("%d dead letters left, want app-1's only", n)
				}
				if resp, body := e.Get(t, "/deliveries/confirm?endpoint=%3Cb%3E"); resp.StatusCode != 400 || strings.Contains(body, "<b>") {
					t.Errorf("confirm with a bad endpoint name = %d:\n%s", resp.StatusCode, body)
				}
			})
		}
	})
}

// TestDeliveriesReadOnly: a read-only dashboard lists the dead-lettered
// deliveries with the timerctl commands that redrive them, offers no
// action, and refuses the POST. That the commands, run, redrive is
// TestDashboardRedriveCommandsRun in cmd/internal/ctl, which may import
// timerctl's package.
func TestDeliveriesReadOnly(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		e := newDeliveryEnv(t, b, 0, ui.Options{})
		deliverAndFail(t, e.q, map[string]string{"b-1": "billing", "b-2": "billing"}, "b-1", "b-2")
		page, err := e.q.Deliveries().DeadLetters(context.Background(), queue.DeadLetterListOptions{Limit: 10})
		dead := page.DeadLetters
		if err != nil || len(dead) != 2 {
			t.Fatalf("dead letters: %v %v", dead, err)
		}
		_, body := e.Get(t, "/deliveries?endpoint=billing")
		ns := e.q.Namespace()
		for _, want := range []string{"timerctl -n " + ns + " redrive --endpoint billing", "timerctl -n " + ns + " redrive 0/" + dead[0].Event.StreamID} {
			if !strings.Contains(body, want) {
				t.Errorf("the read-only page lacks the command %q:\n%s", want, body)
			}
		}
		if strings.Contains(body, "redrive-all") || strings.Contains(body, "Redrive…") {
			t.Errorf("the read-only page offers a redrive:\n%s", body)
		}
		if resp, _ := e.Get(t, "/deliveries/confirm?endpoint=billing"); resp.StatusCode != 403 {
			t.Errorf("confirm in read-only mode = %d, want 403", resp.StatusCode)
		}
		if resp, _ := e.Post(t, "/deliveries/redrive", url.Values{"endpoint": {"billing"}}, nil); resp.StatusCode != 403 {
			t.Errorf("POST in read-only mode = %d, want 403", resp.StatusCode)
		}
		if n, _ := e.q.Deliveries().DeadLetterCount(context.Background()); n != 2 {
			t.Fatalf("%d dead letters after refused redrives, want 2", n)
		}
	})
}

// regexpFind returns the first group of pattern's first match in body.
func regexpFind(t *testing.T, body, pattern string) string {
	t.Helper()
	m := regexp.MustCompile(pattern).FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no %s in:\n%s", pattern, body)
	}
	return m[1]
}

func sorted(s []string) []string { return slices.Sorted(slices.Values(s)) }

// TestEndpointEnableDisable: with actions, an endpoint is disabled and
// enabled again through the confirmation; without the CSRF token, or on a
// read-only dashboard, the POST is refused and nothing changes.
func TestEndpointEnableDisable(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		e := newDeliveryEnv(t, b, 0, ui.Options{AllowWrites: true})
		disabled := func(name string) bool {
			t.Helper()
			ep, err := e.q.Endpoints().Get(ctx, name)
			if err != nil {
				t.Fatal(err)
			}
			return ep.Disabled
		}
		if resp, _ := e.Post(t, "/endpoints/disable", url.Values{"id": {"billing"}}, nil); resp.StatusCode != 403 || disabled("billing") {
			t.Errorf("disable without a CSRF token = %d, disabled %v; want 403 and no change", resp.StatusCode, disabled("billing"))
		}
		_, body := e.Get(t, "/endpoints")
		link := regexpFind(t, section(t, body, "endpoint-billing"), `class="button ep-toggle" href="([^"]+)">Disable…`)
		resp, _ := e.Act(t, html.UnescapeString(link))
		if resp.StatusCode != 303 || !strings.Contains(resp.Header.Get("Location"), "done=disabled") || !disabled("billing") {
			t.Fatalf("disable = %d %s, disabled %v", resp.StatusCode, resp.Header.Get("Location"), disabled("billing"))
		}
		_, body = e.Get(t, "/endpoints?done=disabled")
		if !strings.Contains(body, `id="notice">Endpoint disabled`) {
			t.Errorf("no notice after disabling:\n%s", body)
		}
		link = regexpFind(t, section(t, body, "endpoint-billing"), `class="button ep-toggle" href="([^"]+)">Enable…`)
		if resp, _ := e.Act(t, html.UnescapeString(link)); resp.StatusCode != 303 || disabled("billing") {
			t.Fatalf("enable = %d, disabled %v", resp.StatusCode, disabled("billing"))
		}
		if resp, _ := e.Get(t, "/endpoints/confirm?name=billing&action=delete"); resp.StatusCode != 404 {
			t.Errorf("confirm of an unknown action = %d, want 404", resp.StatusCode)
		}
		if resp, body := e.Act(t, "/endpoints/confirm?name=nope&action=disable"); resp.StatusCode != 404 {
			t.Errorf("disable of a missing endpoint = %d, want 404:\n%s", resp.StatusCode, body)
		}

		ro := newEnvHandler(t, e.q, mustUI(t, e.q, ui.Options{}), "")
		if _, body := ro.Get(t, "/endpoints"); strings.Contains(body, "ep-toggle") {
			t.Errorf("the read-only endpoints page offers enable or disable:\n%s", body)
		}
		if resp, _ := ro.Get(t, "/endpoints/confirm?name=audit&action=enable"); resp.StatusCode != 403 {
			t.Errorf("confirm on a read-only dashboard = %d, want 403", resp.StatusCode)
		}
		if resp, _ := ro.Post(t, "/endpoints/enable", url.Values{"id": {"audit"}}, nil); resp.StatusCode != 403 || !disabled("audit") {
			t.Errorf("enable on a read-only dashboard = %d, disabled %v; want 403 and no change", resp.StatusCode, disabled("audit"))
		}
	})
}

func mustUI(t *testing.T, q *queue.Queue, opts ui.Options) *ui.Handler {
	t.Helper()
	h, err := ui.New(q, opts)
	if err != nil {
		t.Fatal(err)
	}
	return h
}
