package ctl_test

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/queue"
)

// TestUIInChromiumWithAuth: the dashboard `timerctl ui` serves behind a
// token works in a real browser that logs in with it (basic auth, any user),
// live tail included. (A request without it gets 401:
// TestUIAuthReadOnlyAndNoPassword.) Like the ui
// package's browser tests, it skips without Chromium unless
// TIMERQ_REQUIRE_BROWSER=1.
func TestUIInChromiumWithAuth(t *testing.T) {
	path, err := exec.LookPath("chromium")
	if err != nil {
		if os.Getenv("TIMERQ_REQUIRE_BROWSER") == "1" {
			t.Fatal("chromium not found; apt-get install chromium")
		}
		t.Skip("chromium not found; apt-get install chromium (TIMERQ_REQUIRE_BROWSER=1 makes this a failure)")
	}
	srv := redistest.Start(t, redistest.Config{})
	ns := redistest.Namespace(t)
	q, err := queue.New(srv.Client(t), queue.Options{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	if _, err := q.Schedule(context.Background(), "auth-1", time.Now().Add(time.Hour), nil); err != nil {
		t.Fatal(err)
	}
	if _, _, err := q.Recurring().Put(context.Background(), queue.Recurring{ID: "auth-sched", Every: time.Hour}); err != nil {
		t.Fatal(err)
	}
	const token = "browser-token-0123456789"
	t.Setenv("TIMERQ_UI_TOKEN", token)
	t.Setenv("TIMERQ_UI_BASIC_AUTH", "")
	base, _ := uiServer(t, srv.URL(), ns, "--prefix", "/dash")

	actx, cancelA := chromedp.NewExecAllocator(context.Background(), chromedp.ExecPath(path), chromedp.Headless,
		chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.Flag("disable-dev-shm-usage", true))
	ctx, cancelB := chromedp.NewContext(actx)
	ctx, cancelT := context.WithTimeout(ctx, 60*time.Second)
	defer func() { cancelT(); cancelB(); cancelA() }()

	authed := strings.Replace(base, "http://", "http://operator:"+token+"@", 1)
	if err := chromedp.Do(ctx, chromedp.Navigate(authed+"/dash/timers"), chromedp.WaitVisible(chromedp.CSS("#timers a.timer-link"))); err != nil {
		t.Fatalf("with the token: %v", err)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/dash/schedules"), chromedp.Click(chromedp.CSS("#schedules a.schedule-link")),
		chromedp.WaitVisible(chromedp.ID("action-pause"))); err != nil {
		t.Fatalf("the schedules behind auth: %v", err)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/dash/tail"), chromedp.WaitVisible(chromedp.ID("tail"))); err != nil {
		t.Fatal(err)
	}
	redistest.Eventually(t, 15*time.Second, "the live tail to connect behind auth", func() bool {
		s, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById("live-status").textContent`))
		return err == nil && s == "live"
	})
	if _, err := q.FireNow(context.Background(), "auth-1"); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Engine().Claim(context.Background(), 10); err != nil {
		t.Fatal(err)
	}
	redistest.Eventually(t, 15*time.Second, "the fire to reach the live tail behind auth", func() bool {
		s, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector("#tail-body tr.new td.id")?.textContent ?? ""`))
		return s == "auth-1"
	})
}
