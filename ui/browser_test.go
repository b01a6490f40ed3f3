package ui_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/queue"
	"github.com/timerq/timerq/ui"
)

// These tests drive a real Chromium (Debian's package: apt-get install
// chromium). Without one they skip, unless TIMERQ_REQUIRE_BROWSER=1 (set by
// .ci/run), which makes them fail instead. TIMERQ_UPDATE_SCREENSHOT=1
// rewrites docs/ui-overview.png.

const browserHint = "install it (apt-get install chromium) or set TIMERQ_CHROMIUM; TIMERQ_REQUIRE_BROWSER=1 turns this skip into a failure"

func chromiumPath(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: the fast loop drives no browser")
	}
	for _, p := range []string{os.Getenv("TIMERQ_CHROMIUM"), "chromium", "chromium-browser", "google-chrome"} {
		if p == "" {
			continue
		}
		if path, err := exec.LookPath(p); err == nil {
			return path
		}
	}
	if os.Getenv("TIMERQ_REQUIRE_BROWSER") == "1" {
		t.Fatalf("no Chromium found; %s", browserHint)
	}
	t.Skipf("no Chromium found; %s", browserHint)
	return ""
}

// browser starts a headless Chromium for the test and returns a tab.
func browser(t *testing.T) context.Context {
	t.Helper()
	path := chromiumPath(t)
	actx, cancelA := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(path),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.WindowSize(1280, 900),
	)
	ctx, cancelB := chromedp.NewContext(actx)
	ctx, cancelT := context.WithTimeout(ctx, 90*time.Second)
	t.Cleanup(func() { cancelT(); cancelB(); cancelA() })
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1280, 900)); err != nil {
		t.Fatalf("starting Chromium at %s: %v", path, err)
	}
	return ctx
}

func do(t *testing.T, ctx context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	start := time.Now()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	t.Logf("%s: %v", what, time.Since(start).Round(time.Millisecond))
}

func eval[T any](t *testing.T, ctx context.Context, js string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](js, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("evaluate %s: %v", js, err)
	}
	return v
}

// waitJS polls a boolean expression until it holds.
func waitJS(t *testing.T, ctx context.Context, what, js string) {
	t.Helper()
	held := false
	defer func() { // on a timeout, show the page
		if !held {
			html, _ := chromedp.Run(ctx, chromedp.OuterHTML(chromedp.CSS("main")))
			t.Logf("page while waiting for %s:\n%s", what, html)
		}
	}()
	redistest.Eventually(t, 15*time.Second, what, func() bool { return eval[bool](t, ctx, js) })
	held = true
}

// follow clicks the element sel matches through the page's own
// element.click() and waits for an element next on the page the click
// leads to, which the page it leaves must not have. Unlike chromedp.Click
// followed by WaitVisible, it holds no CDP node ID across the navigation
// (see text): on a loaded machine a chain of such clicks failed with
// "Could not find node with given id".
func follow(t *testing.T, ctx context.Context, what, sel, next string) {
	t.Helper()
	start := time.Now()
	s, _ := json.Marshal(sel)
	if !eval[bool](t, ctx, fmt.Sprintf(`(function(){var e=document.querySelector(%s);if(!e)return false;e.click();return true})()`, s)) {
		html, _ := chromedp.Run(ctx, chromedp.OuterHTML(chromedp.CSS("main")))
		t.Fatalf("%s: no element %s on the page:\n%s", what, sel, html)
	}
	n, _ := json.Marshal(next)
	// While the new page loads an evaluation can fail (its context is
	// gone): that is not there yet, not an error.
	redistest.Eventually(t, 15*time.Second, what, func() bool {
		there, err := chromedp.Run(ctx, chromedp.Evaluate[bool](fmt.Sprintf(`document.querySelector(%s) !== null`, n)))
		return err == nil && there
	})
	t.Logf("%s: %v", what, time.Since(start).Round(time.Millisecond))
}

// text returns the trimmed text content of the element with that id.
//
// It reads the live DOM in one evaluation rather than through a CDP node
// ID: after a click that navigates, a node ID found by WaitVisible can be
// invalidated by the new document's late DOM.documentUpdated ("No node with
// given id found"), which a loaded machine made happen.
func text(t *testing.T, ctx context.Context, id string) string {
	t.Helper()
	quoted, _ := json.Marshal(id)
	s := eval[*string](t, ctx, fmt.Sprintf(`(function(){var e=document.getElementById(%s);return e?e.textContent:null})()`, quoted))
	if s == nil {
		t.Fatalf("text of #%s: no such element", id)
	}
	return strings.TrimSpace(*s)
}

// mount serves h under /ops/timerq, as an application would.
func mount(t *testing.T, h http.Handler) string {
	mux := http.NewServeMux()
	mux.Handle("/ops/timerq/", h)
	srv := httptest.NewServer(mux)
	t.Cleanup(func() {
		// The browser, closed later, still holds a live tail open, and
		// Close waits for every request.
		srv.CloseClientConnections()
		srv.Close()
	})
	return srv.URL + "/ops/timerq"
}

// seed fills a namespace the way the screenshot shows it: due soon and
// later, some overdue, some fired with lateness, a consumer group.
func seed(t *testing.T, q *queue.Queue) {
	t.Helper()
	ctx := context.Background()
	var batch []queue.NewTimer
	now := time.Now()
	for i := range 12 {
		batch = append(batch, queue.NewTimer{ID: fmt.Sprintf("order-%04d", i), Due: now.Add(time.Duration(i+1) * 7 * time.Minute),
			Payload: []byte(fmt.Sprintf(`{"order":%d,"action":"expire-cart"}`, i))})
	}
	for i := range 5 {
		batch = append(batch, queue.NewTimer{ID: fmt.Sprintf("invoice-%03d", i), Due: now.Add(time.Duration(i+1) * 5 * time.Hour),
			Payload: []byte(`{"remind":"invoice due"}`)})
	}
	for i := range 3 {
		batch = append(batch, queue.NewTimer{ID: fmt.Sprintf("retry-%d", i), Due: now.Add(time.Duration(i+1) * 30 * time.Second), Payload: []byte("retry")})
	}
	for i := range 8 {
		batch = append(batch, queue.NewTimer{ID: fmt.Sprintf("fired-%d", i), Due: now.Add(-time.Duration(i*40) * time.Millisecond), Payload: []byte("done")})
	}
	if _, err := q.ScheduleBatch(ctx, batch); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Engine().Claim(ctx, 8); err != nil {
		t.Fatal(err)
	}
	if _, err := q.ScheduleBatch(ctx, []queue.NewTimer{
		{ID: "late-1", Due: now.Add(-2 * time.Second)}, {ID: "late-2", Due: now.Add(-time.Second)},
	}); err != nil {
		t.Fatal(err)
	}
}

// TestBrowserOperate: load the dashboard, filter the timers, open one,
// cancel it through the confirmation and see Redis change; see a fire
// arrive in the live tail; take the screenshot.
func TestBrowserOperate(t *testing.T) {
	ctx := browser(t)
	srv := redistest.Start(t, redistest.Config{})
	q, err := queue.New(srv.Client(t), queue.Options{Namespace: "shop"})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	seed(t, q)
	h, err := ui.New(q, ui.Options{Prefix: "/ops/timerq", AllowWrites: true})
	if err != nil {
		t.Fatal(err)
	}
	base := mount(t, h)

	do(t, ctx, "load the overview", chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.ID("count-scheduled")))
	if got := text(t, ctx, "count-scheduled"); got != "22" {
		t.Errorf("scheduled = %q, want 22", got)
	}
	if got := text(t, ctx, "count-overdue"); got != "2" {
		t.Errorf("overdue = %q, want 2", got)
	}
	if got := text(t, ctx, "count-fired"); got != "8" {
		t.Errorf("fired = %q, want 8", got)
	}
	if !strings.Contains(text(t, ctx, "fire-rate"), "/s") || eval[int](t, ctx, `document.querySelectorAll("svg.hist rect").length`) != 9 {
		t.Error("overview lacks the fire rate or the 9-bucket histogram")
	}
	if os.Getenv("TIMERQ_UPDATE_SCREENSHOT") == "1" {
		png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join("..", "docs", "ui-overview.png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	// Filter by ID prefix and state through the form.
	do(t, ctx, "filter", chromedp.Navigate(base+"/timers"), chromedp.WaitVisible(chromedp.ID("f-prefix")),
		chromedp.SendKeys(chromedp.ID("f-prefix"), "invoice-"),
		chromedp.SetValue(chromedp.ID("f-state"), "scheduled"),
		chromedp.Click(chromedp.ID("f-apply")),
		chromedp.WaitVisible(chromedp.ID("prefix-note")))
	ids := eval[[]string](t, ctx, `Array.from(document.querySelectorAll("#timers a.timer-link")).map(a => a.textContent)`)
	if fmt.Sprint(ids) != "[invoice-000 invoice-001 invoice-002 invoice-003 invoice-004]" {
		t.Fatalf("filtered list = %v, want the five invoices", ids)
	}

	// Open one and cancel it, confirming.
	do(t, ctx, "open and cancel",
		chromedp.Click(chromedp.CSS(`#timers a.timer-link`)),
		chromedp.WaitVisible(chromedp.ID("timer-id")),
		chromedp.Click(chromedp.ID("action-cancel")),
		chromedp.WaitVisible(chromedp.ID("confirm-yes")))
	if tm, _ := q.Get(context.Background(), "invoice-000"); tm.State != queue.StateScheduled {
		t.Fatalf("the confirmation page already changed the timer: %s", tm.State)
	}
	do(t, ctx, "confirm", chromedp.Click(chromedp.ID("confirm-yes")), chromedp.WaitVisible(chromedp.ID("notice")))
	if got := text(t, ctx, "timer-state"); got != "cancelled" {
		t.Errorf("page shows state %q after cancel", got)
	}
	tm, err := q.Get(context.Background(), "invoice-000")
	if err != nil || tm.State != queue.StateCancelled {
		t.Fatalf("Redis has invoice-000 as %v (%v), want cancelled", tm.State, err)
	}
	if n, _ := srv.Client(t).ZScore(context.Background(), q.Keys().Shard(0)[0], "invoice-000").Result(); n != 0 {
		t.Error("invoice-000 is still in the due set")
	}

	// The live tail shows a fire as it happens.
	do(t, ctx, "open the tail", chromedp.Navigate(base+"/tail"), chromedp.WaitVisible(chromedp.ID("tail")))
	waitJS(t, ctx, "the event stream to connect", `document.getElementById("live-status").textContent === "live"`)
	if _, err := q.Schedule(context.Background(), "tail-me", time.Now().Add(-time.Millisecond), []byte("hello from the tail")); err != nil {
		t.Fatal(err)
	}
	if res, err := q.Engine().Claim(context.Background(), 10); err != nil || len(res.Fired) == 0 {
		t.Fatalf("claim: %v %v", res, err)
	}
	waitJS(t, ctx, "tail-me in the live tail", `document.querySelector("#tail-body tr.new td.id")?.textContent === "tail-me"`)
}

// TestBrowserReadOnlyAndXSS: a read-only dashboard offers no action and a
// forged POST from the page is refused; a writable one refuses a POST
// without its token; markup in an ID or payload stays text everywhere,
// including in the live tail.
func TestBrowserReadOnlyAndXSS(t *testing.T) {
	ctx := browser(t)
	srv := redistest.Start(t, redistest.Config{})
	q, err := queue.New(srv.Client(t), queue.Options{Namespace: "xss"})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	const evil = `<script>window.pwned=1</script><img src=x onerror="window.pwned=2">`
	if _, err := q.Schedule(context.Background(), evil, time.Now().Add(time.Hour), []byte(evil)); err != nil {
		t.Fatal(err)
	}
	ro, err := ui.New(q, ui.Options{Prefix: "/ops/timerq"})
	if err != nil {
		t.Fatal(err)
	}
	roBase := mount(t, ro)
	evilURL := roBase + "/timer?id=" + strings.ReplaceAll(strings.ReplaceAll(
		strings.ReplaceAll(evil, "%", "%25"), "#", "%23"), "&", "%26")

	do(t, ctx, "open the timer read-only", chromedp.Navigate(evilURL), chromedp.WaitVisible(chromedp.ID("timer-id")))
	if got := text(t, ctx, "timer-id"); got != evil {
		t.Errorf("ID shows as %q, want the literal text", got)
	}
	if got := text(t, ctx, "payload"); got != evil {
		t.Errorf("payload shows as %q, want the literal text", got)
	}
	if eval[bool](t, ctx, `document.querySelector("#action-cancel") !== null || document.querySelector("form[method=post]") !== null`) {
		t.Error("read-only page has a cancel button or a POST form")
	}
	status := eval[int](t, ctx, `fetch("/ops/timerq/timer/cancel", {method: "POST",
		body: new URLSearchParams({id: `+"`"+evil+"`"+`, csrf: "forged"})}).then(r => r.status)`)
	if status != 403 {
		t.Errorf("forged POST on the read-only dashboard = %d, want 403", status)
	}

	rw, err := ui.New(q, ui.Options{Prefix: "/ops/timerq", AllowWrites: true})
	if err != nil {
		t.Fatal(err)
	}
	rwBase := mount(t, rw)
	do(t, ctx, "open the timer list read-write", chromedp.Navigate(rwBase+"/timers"), chromedp.WaitVisible(chromedp.CSS("#timers a.timer-link")))
	status = eval[int](t, ctx, `fetch("/ops/timerq/timer/cancel", {method: "POST",
		body: new URLSearchParams({id: `+"`"+evil+"`"+`})}).then(r => r.status)`)
	if status != 403 {
		t.Errorf("POST without a CSRF token = %d, want 403", status)
	}
	if tm, _ := q.Get(context.Background(), evil); tm.State != queue.StateScheduled {
		t.Fatalf("a refused POST changed the timer: %s", tm.State)
	}
	if got := eval[string](t, ctx, `document.querySelector("#timers a.timer-link").textContent`); got != evil {
		t.Errorf("list shows the ID as %q", got)
	}

	do(t, ctx, "open the tail", chromedp.Navigate(rwBase+"/tail"), chromedp.WaitVisible(chromedp.ID("tail")))
	waitJS(t, ctx, "the event stream to connect", `document.getElementById("live-status").textContent === "live"`)
	if _, err := q.FireNow(context.Background(), evil); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Engine().Claim(context.Background(), 10); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "the evil ID in the tail", `document.querySelector("#tail-body tr.new td.id")?.textContent === `+"`"+evil+"`")
	if eval[bool](t, ctx, `document.querySelector("#tail-body img") !== null || window.pwned !== undefined`) {
		t.Error("the tail rendered markup from a fire event")
	}
	do(t, ctx, "reload the tail", chromedp.Navigate(rwBase+"/tail"), chromedp.WaitVisible(chromedp.ID("tail")))
	if eval[bool](t, ctx, `document.querySelector("main img") !== null || document.querySelector("main script") !== null || window.pwned !== undefined`) {
		t.Error("the server-rendered tail has markup from a fire event")
	}
}
