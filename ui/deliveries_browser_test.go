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

// TestBrowserDeliveries: in Chromium, open the endpoints, follow an
// endpoint's dead letters to a timer's attempt log, and redrive all of the
// endpoint's through the confirmation, seeing Redis change; a URL and
// errors holding markup stay text, and secrets show redacted only.
// TIMERQ_UPDATE_SCREENSHOT=1 rewrites docs/ui-endpoints.png.
func TestBrowserDeliveries(t *testing.T) {
	ctx := browser(t)
	srv := redistest.Start(t, redistest.Config{})
	q, err := queue.New(srv.Client(t), queue.Options{Namespace: "shop"})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	putEndpoints(t, q,
		queue.Endpoint{Name: "billing", URL: "https://billing.example.com/webhooks/timerq", Secrets: testSecrets,
			Headers: map[string]string{"Authorization": "Bearer topsecret-header"}, Timeout: 5 * time.Second, MaxInFlight: 32,
			Retry: queue.RetryPolicy{MaxAttempts: 5, Base: 2 * time.Second, Cap: 5 * time.Minute}},
		queue.Endpoint{Name: "crm", URL: "https://crm.example.com/hooks", Secrets: testSecrets[1:], Disabled: true},
		queue.Endpoint{Name: "odd", URL: evilURL, Secrets: testSecrets[:1], Retry: queue.RetryPolicy{RetryClientErrors: true}})
	deliverAndFail(t, q, map[string]string{"invoice-1041": "billing", "invoice-1042": "billing", "invoice-1043": "billing", "sync-7": "crm"},
		"invoice-1041", "invoice-1042")
	h, err := ui.New(q, ui.Options{Prefix: "/ops/timerq", AllowWrites: true})
	if err != nil {
		t.Fatal(err)
	}
	base := mount(t, h)
	pwned := `document.querySelector("main img") !== null || window.pwned !== undefined`

	do(t, ctx, "load the endpoints", chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.ID("count-scheduled")),
		chromedp.Click(chromedp.CSS(`header nav a[href$="/endpoints"]`)), chromedp.WaitVisible(chromedp.ID("endpoints")))
	names := eval[[]string](t, ctx, `Array.from(document.querySelectorAll("#endpoints td.ep-name")).map(td => td.textContent)`)
	if strings.Join(names, ",") != "billing,crm,odd" {
		t.Errorf("endpoints listed = %q, want billing, crm, odd", names)
	}
	if got := eval[string](t, ctx, `document.querySelector("#endpoint-odd td.ep-url").textContent`); got != evilURL {
		t.Errorf("odd's URL shows as %q, want the text %q", got, evilURL)
	}
	if eval[bool](t, ctx, pwned) {
		t.Error("the endpoints page rendered markup from an endpoint's URL")
	}
	secrets := eval[string](t, ctx, `document.querySelector("#endpoint-billing td.ep-secrets").textContent`)
	if !strings.Contains(secrets, testSecrets[0].Redacted()) || !strings.Contains(secrets, testSecrets[1].Redacted()) {
		t.Errorf("billing's secrets show as %q, want both redacted", secrets)
	}
	page := eval[string](t, ctx, `document.body.innerText`)
	for _, s := range testSecrets {
		if strings.Contains(page, s.Reveal()) {
			t.Errorf("the page shows %s whole", s.Redacted())
		}
	}
	if strings.Contains(page, "topsecret-header") {
		t.Error("the page shows a header's value")
	}
	if os.Getenv("TIMERQ_UPDATE_SCREENSHOT") == "1" {
		png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join("..", "docs", "ui-endpoints.png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	follow(t, ctx, "open billing's dead letters", "#endpoint-billing a.ep-dead", "#deliveries")
	errs := eval[[]string](t, ctx, `Array.from(document.querySelectorAll("#deliveries td.error")).map(td => td.textContent)`)
	if len(errs) != 2 || errs[0] != "HTTP 500: "+evilError {
		t.Errorf("dead letters' errors show as %q, want two, the markup as text", errs)
	}
	if eval[bool](t, ctx, pwned) {
		t.Error("the dead-lettered deliveries rendered markup from an error")
	}

	follow(t, ctx, "open invoice-1041", `#deliveries a[href$="id=invoice-1041"]`, "#attempts")
	if got := text(t, ctx, "timer-endpoint"); got != "billing" {
		t.Errorf("invoice-1041 delivers to %q, want billing", got)
	}
	cells := eval[[]string](t, ctx, `Array.from(document.querySelectorAll("#attempts tbody tr td")).map(td => td.textContent.trim())`)
	if len(cells) != 7 || cells[0] != "1" || cells[2] != "500" || cells[4] != "dead_letter (exhausted)" || cells[6] != evilError {
		t.Errorf("the attempt log shows %q", cells)
	}
	if eval[bool](t, ctx, pwned) {
		t.Error("the attempt log rendered markup from an error")
	}

	follow(t, ctx, "back to the endpoints", "#timer-endpoint", "#endpoints")
	follow(t, ctx, "billing's dead letters again", "#endpoint-billing a.ep-dead", "#redrive-all")
	follow(t, ctx, "redrive all of billing's", "#redrive-all", "#confirm")
	follow(t, ctx, "confirm the redrive", "#confirm-yes", "#notice")
	if n, err := q.Deliveries().DeadLetterCount(context.Background()); err != nil || n != 0 {
		t.Errorf("%d dead letters after the redrive (%v), want 0", n, err)
	}
	if eval[bool](t, ctx, `document.getElementById("deliveries") !== null`) {
		t.Error("billing's redriven deliveries are still listed")
	}
}
