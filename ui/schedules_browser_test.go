package ui_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/queue"
	"github.com/timerq/timerq/ui"
)

// TestBrowserSchedules: in Chromium, open the schedules, open one, pause it
// through the confirmation and see Redis change, then resume it; a schedule
// ID and payload holding markup stay text. TIMERQ_UPDATE_SCREENSHOT=1
// rewrites docs/ui-schedule.png.
func TestBrowserSchedules(t *testing.T) {
	ctx := browser(t)
	srv := redistest.Start(t, redistest.Config{})
	q, err := queue.New(srv.Client(t), queue.Options{Namespace: "shop"})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	bg := context.Background()
	zone := time.UTC
	if berlin, err := time.LoadLocation("Europe/Berlin"); err == nil {
		zone = berlin
	}
	const evil = `<script>window.pwned=1</script><img src=x onerror="window.pwned=2">`
	for _, r := range []queue.Recurring{
		{ID: "nightly-report", Spec: "0 3 * * *", Location: zone, Payload: []byte(`{"report":"sales","format":"pdf"}`)},
		{ID: "cart-sweeper", Every: 15 * time.Minute, Jitter: 30 * time.Second, CatchUp: queue.CatchUpSkip, Ahead: 3,
			Payload: []byte(`{"sweep":"abandoned-carts"}`)},
		{ID: "weekly-digest", Spec: "0 9 * * MON", Payload: []byte("digest"), MaxCount: 52},
		{ID: evil, Every: time.Hour, Payload: []byte(evil)},
	} {
		if _, _, err := q.Recurring().Put(bg, r); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := q.Recurring().Pause(bg, "weekly-digest"); err != nil {
		t.Fatal(err)
	}
	// One occurrence of cart-sweeper has fired, so its page has a recent one.
	sweeper, err := q.Recurring().Get(bg, "cart-sweeper")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.FireNow(bg, sweeper.Pending[0].ID); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Engine().Claim(bg, 10); err != nil {
		t.Fatal(err)
	}
	h, err := ui.New(q, ui.Options{Prefix: "/ops/timerq", AllowWrites: true})
	if err != nil {
		t.Fatal(err)
	}
	base := mount(t, h)

	do(t, ctx, "load the schedules", chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.ID("count-scheduled")),
		chromedp.Click(chromedp.CSS(`header nav a[href$="/schedules"]`)), chromedp.WaitVisible(chromedp.ID("schedules")))
	ids := eval[[]string](t, ctx, `Array.from(document.querySelectorAll("#schedules a.schedule-link")).map(a => a.textContent)`)
	if len(ids) != 4 || !strings.Contains(strings.Join(ids, "|"), evil) {
		t.Fatalf("schedules listed = %q, want the four, the evil one as text", ids)
	}
	if eval[bool](t, ctx, `document.querySelector("main img") !== null || window.pwned !== undefined`) {
		t.Error("the schedules list rendered markup from a schedule")
	}

	do(t, ctx, "open cart-sweeper", chromedp.Click(chromedp.CSS(`#schedules a.schedule-link[href$="id=cart-sweeper"]`)),
		chromedp.WaitVisible(chromedp.ID("schedule-id")))
	if got := eval[int](t, ctx, `document.querySelectorAll("#next li").length`); got != 5 {
		t.Errorf("%d next occurrences shown, want 5", got)
	}
	if got := eval[int](t, ctx, `document.querySelectorAll("#pending a.occurrence-link").length`); got != 2 {
		t.Errorf("%d armed occurrences shown, want 2 (3 armed, 1 fired)", got)
	}
	if got := eval[string](t, ctx, `document.querySelector("#recent a.occurrence-link")?.textContent ?? ""`); got != sweeper.Pending[0].ID {
		t.Errorf("recent occurrence = %q, want the fired %s", got, sweeper.Pending[0].ID)
	}
	if os.Getenv("TIMERQ_UPDATE_SCREENSHOT") == "1" {
		png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join("..", "docs", "ui-schedule.png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	do(t, ctx, "open nightly-report", chromedp.Navigate(base+"/schedules"), chromedp.WaitVisible(chromedp.ID("schedules")),
		chromedp.Click(chromedp.CSS(`#schedules a.schedule-link[href$="id=nightly-report"]`)),
		chromedp.WaitVisible(chromedp.ID("schedule-id")))
	if got := text(t, ctx, "schedule-zone"); got != zone.String() {
		t.Errorf("zone = %q, want %s", got, zone)
	}
	do(t, ctx, "ask to pause", chromedp.Click(chromedp.ID("action-pause")), chromedp.WaitVisible(chromedp.ID("confirm-yes")))
	if got, _ := q.Recurring().Get(bg, "nightly-report"); got.State != queue.RecurringActive {
		t.Fatalf("the confirmation page already paused it: %s", got.State)
	}
	do(t, ctx, "confirm the pause", chromedp.Click(chromedp.ID("confirm-yes")), chromedp.WaitVisible(chromedp.ID("notice")))
	if got := text(t, ctx, "schedule-state"); got != "paused" {
		t.Errorf("page shows %q after pause", got)
	}
	got, err := q.Recurring().Get(bg, "nightly-report")
	if err != nil || got.State != queue.RecurringPaused || len(got.Pending) != 0 {
		t.Fatalf("Redis has nightly-report %s with %d armed (%v), want paused with none", got.State, len(got.Pending), err)
	}
	if eval[bool](t, ctx, `document.querySelector("#action-pause") !== null`) {
		t.Error("a paused schedule still offers pause")
	}

	do(t, ctx, "resume", chromedp.Click(chromedp.ID("action-resume")), chromedp.WaitVisible(chromedp.ID("confirm-yes")),
		chromedp.Click(chromedp.ID("confirm-yes")), chromedp.WaitVisible(chromedp.ID("notice")))
	if got := text(t, ctx, "schedule-state"); got != "active" {
		t.Errorf("page shows %q after resume", got)
	}
	if got, err = q.Recurring().Get(bg, "nightly-report"); err != nil || got.State != queue.RecurringActive || len(got.Pending) != queue.DefaultAhead {
		t.Fatalf("Redis has nightly-report %s with %d armed (%v), want active with %d", got.State, len(got.Pending), err, queue.DefaultAhead)
	}

	do(t, ctx, "open the evil schedule", chromedp.Navigate(base+"/schedules"), chromedp.WaitVisible(chromedp.ID("schedules")),
		chromedp.Click(chromedp.CSS(`#schedules a.schedule-link[href*="script"]`)), chromedp.WaitVisible(chromedp.ID("schedule-id")))
	if got := text(t, ctx, "schedule-id"); got != evil {
		t.Errorf("ID shows as %q, want the literal text", got)
	}
	if got := text(t, ctx, "payload"); got != evil {
		t.Errorf("payload shows as %q, want the literal text", got)
	}
	if eval[bool](t, ctx, `document.querySelector("main img") !== null || window.pwned !== undefined`) {
		t.Error("the schedule page rendered markup from its ID or payload")
	}
}
