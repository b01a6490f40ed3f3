package ui_test

import (
	"context"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/queue"
	"github.com/timerq/timerq/ui"
)

// TestBrowserFlows: in Chromium, reach the flows page from the navigation,
// see each key's parked and in-flight counts and its policy, a key
// holding markup as text, and switch to another consumer group.
func TestBrowserFlows(t *testing.T) {
	ctx := browser(t)
	srv := redistest.Start(t, redistest.Config{})
	q, err := queue.New(srv.Client(t), queue.Options{Namespace: "flows"})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	bg := context.Background()
	const evil = `<img src=x onerror="window.pwned=2">`
	for _, p := range []queue.FlowPolicy{
		{Key: "acme", Rate: 10, Period: time.Second, MaxInFlight: 1},
		{Rate: 5, Period: time.Minute, MaxInFlight: 2},
	} {
		if err := q.Flows().PutPolicy(bg, p); err != nil {
			t.Fatal(err)
		}
	}
	fireFlow(t, q, "acme", 3)
	fireFlow(t, q, evil, 6)
	if _, err := q.Lease(bg, "billing", "c1", queue.LeaseOptions{Lease: time.Minute, Count: 1}); err != nil {
		t.Fatal(err)
	}
	if ds, err := q.Lease(bg, "timerq-deliver", "c1", queue.LeaseOptions{Lease: time.Minute, Count: 100}); err != nil || len(ds) != 3 {
		t.Fatalf("leased %d, %v; want 1 of acme and 2 of the other key", len(ds), err)
	}
	h, err := ui.New(q, ui.Options{Prefix: "/ops/timerq"})
	if err != nil {
		t.Fatal(err)
	}
	base := mount(t, h)

	do(t, ctx, "load the flows", chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.ID("count-scheduled")),
		chromedp.Click(chromedp.CSS(`header nav a[href$="/flows"]`)), chromedp.WaitVisible(chromedp.ID("flows")))
	type row struct{ Key, Parked, InFlight, Rate, Max, Policy string }
	rows := eval[[]row](t, ctx, `Array.from(document.querySelectorAll("#flows tbody tr")).map(tr => ({
		Key: tr.querySelector(".flow-key").textContent, Parked: tr.querySelector(".flow-backlog").textContent,
		InFlight: tr.querySelector(".flow-inflight").textContent, Rate: tr.querySelector(".flow-rate").textContent,
		Max: tr.querySelector(".flow-max").textContent, Policy: tr.querySelector(".flow-policy").textContent}))`)
	want := []row{
		{evil, "4", "2 full", "5 per 1m0s (one every 12s)", "2", "namespace default"},
		{"acme", "2", "1 full", "10 per 1s (one every 100ms)", "1", "namespace"},
	}
	if len(rows) != len(want) {
		t.Fatalf("flows rows %+v, want %+v", rows, want)
	}
	for i := range want {
		if rows[i] != want[i] {
			t.Errorf("row %d = %+v, want %+v", i, rows[i], want[i])
		}
	}
	if got := text(t, ctx, "flow-backlog"); got != "6" {
		t.Errorf("parked in all = %q, want 6", got)
	}
	if eval[bool](t, ctx, `document.querySelector("main img") !== null || window.pwned !== undefined`) {
		t.Error("the flows page rendered markup from a flow key")
	}
	do(t, ctx, "switch to billing", chromedp.Click(chromedp.CSS(`#flow-groups a[href$="group=billing"]`)),
		chromedp.WaitVisible(chromedp.ID("flows-empty")))
	if got := text(t, ctx, "flow-group"); got != "billing" {
		t.Errorf("group shown %q after switching, want billing", got)
	}
}
