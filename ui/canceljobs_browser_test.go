package ui_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/queue"
	"github.com/timerq/timerq/ui"
)

// TestBrowserBulkCancel: in Chromium, open the cancel jobs from the
// navigation, cancel by an ID prefix through the confirmation, and see the
// job done with its count, the matching timers cancelled in Redis and the
// others not, and the job listed.
func TestBrowserBulkCancel(t *testing.T) {
	ctx := browser(t)
	srv := redistest.Start(t, redistest.Config{})
	q, err := queue.New(srv.Client(t), queue.Options{Namespace: "shop"})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	bg := context.Background()
	for _, id := range []string{"cart-1", "cart-2", "carton"} {
		if _, err := q.Schedule(bg, id, time.Now().Add(time.Hour), nil); err != nil {
			t.Fatal(err)
		}
	}
	h, err := ui.New(q, ui.Options{Prefix: "/ops/timerq", AllowWrites: true})
	if err != nil {
		t.Fatal(err)
	}
	base := mount(t, h)

	do(t, ctx, "open the cancel jobs", chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.ID("count-scheduled")),
		chromedp.Click(chromedp.CSS(`header nav a[href$="/cancel-jobs"]`)), chromedp.WaitVisible(chromedp.ID("no-cancel-jobs")))
	do(t, ctx, "ask to cancel cart-", chromedp.SendKeys(chromedp.ID("bulk-prefix"), "cart-"),
		chromedp.Click(chromedp.ID("action-bulk-cancel")), chromedp.WaitVisible(chromedp.ID("confirm-yes")))
	if got := text(t, ctx, "confirm-id"); got != "cart-" {
		t.Errorf("the confirmation names %q, want cart-", got)
	}
	if tm, _ := q.Get(bg, "cart-1"); tm.State != queue.StateScheduled {
		t.Fatalf("the confirmation page already cancelled: cart-1 is %s", tm.State)
	}
	do(t, ctx, "confirm", chromedp.Click(chromedp.ID("confirm-yes")), chromedp.WaitVisible(chromedp.ID("notice")))
	if got := text(t, ctx, "job-state"); got != "done" {
		t.Errorf("job state %q, want done", got)
	}
	if got := text(t, ctx, "job-cancelled"); !strings.HasPrefix(got, "2 ") {
		t.Errorf("job cancelled %q, want 2", got)
	}
	for id, want := range map[string]queue.State{"cart-1": queue.StateCancelled, "cart-2": queue.StateCancelled, "carton": queue.StateScheduled} {
		if tm, err := q.Get(bg, id); err != nil || tm.State != want {
			t.Errorf("Redis has %s %s (%v), want %s", id, tm.State, err, want)
		}
	}
	do(t, ctx, "list the jobs", chromedp.Click(chromedp.CSS(`header nav a[href$="/cancel-jobs"]`)), chromedp.WaitVisible(chromedp.ID("cancel-jobs")))
	if got := eval[[]string](t, ctx, `Array.from(document.querySelectorAll("#cancel-jobs td.job-cancelled")).map(td => td.textContent)`); len(got) != 1 || got[0] != "2" {
		t.Errorf("jobs listed with cancelled counts %q, want one with 2", got)
	}
}
