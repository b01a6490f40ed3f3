package ui_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/internal/timefmt"
	"github.com/timerq/timerq/queue"
	"github.com/timerq/timerq/ui"
)

// TestBrowserPayloadsAndTimes: in Chromium, a binary payload and one of
// control characters show as the preview timerctl prints (size and hex),
// never as raw control bytes, in the timers table, on the timer page and
// in the live tail; times are printed as timerctl prints them, the
// reschedule form takes its own printed time back, and a bare number in a
// filter is refused as timerctl refuses it, not read as Unix ms.
func TestBrowserPayloadsAndTimes(t *testing.T) {
	ctx := browser(t)
	srv := redistest.Start(t, redistest.Config{})
	q, err := queue.New(srv.Client(t), queue.Options{Namespace: "fmt"})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	bin := make([]byte, 40)
	for i := range bin {
		bin[i] = byte(i * 7) // 0x00, 0x07, 0x0e, ...: NUL, BEL, SO
	}
	esc := []byte("\x1b[31mred\x07") // valid UTF-8, but control characters
	due := time.Now().Add(time.Hour).UTC().Truncate(time.Millisecond)
	for id, p := range map[string][]byte{"bin": bin, "esc": esc, "txt": []byte(`{"a":1}`)} {
		if _, err := q.Schedule(context.Background(), id, due, p); err != nil {
			t.Fatal(err)
		}
	}
	h, err := ui.New(q, ui.Options{Prefix: "/ops/timerq", AllowWrites: true})
	if err != nil {
		t.Fatal(err)
	}
	base := mount(t, h)
	noControl := `![...document.querySelectorAll("td.payload, #payload")].some(e => /[\x00-\x08\x0b-\x1f\x7f]/.test(e.textContent))`

	do(t, ctx, "list the timers", chromedp.Navigate(base+"/timers"), chromedp.WaitVisible(chromedp.ID("timers")))
	cells := eval[map[string]string](t, ctx, `Object.fromEntries([...document.querySelectorAll("#timers tbody tr")].map(r => [r.querySelector("td.id").textContent, r.querySelector("td.payload").textContent]))`)
	if want := "<40 bytes: 00070e151c232a31383f464d545b6269…>"; cells["bin"] != want {
		t.Errorf("binary payload cell %q, want %q", cells["bin"], want)
	}
	if want := "<9 bytes: 1b5b33316d72656407>"; cells["esc"] != want {
		t.Errorf("control-character payload cell %q, want %q", cells["esc"], want)
	}
	if cells["txt"] != `{"a":1}` {
		t.Errorf("text payload cell %q", cells["txt"])
	}
	if !eval[bool](t, ctx, noControl) {
		t.Error("the timers table shows raw control bytes")
	}

	do(t, ctx, "open esc", chromedp.Navigate(base+"/timer?id=esc"), chromedp.WaitVisible(chromedp.ID("payload")))
	if got := text(t, ctx, "payload"); !strings.Contains(got, "1b 5b 33 31 6d 72 65 64  07") {
		t.Errorf("timer page payload %q, want a hex dump", got)
	}
	if !eval[bool](t, ctx, noControl) {
		t.Error("the timer page shows raw control bytes")
	}
	// The page prints the due time as timerctl does, and its reschedule
	// form holds that text and takes it back unchanged.
	record := text(t, ctx, "record")
	if !strings.Contains(record, timefmt.Format(due)) {
		t.Errorf("record lacks the due time %s:\n%s", timefmt.Format(due), record)
	}
	if got := eval[string](t, ctx, `document.getElementById("reschedule-due").value`); got != timefmt.Format(due) {
		t.Errorf("reschedule form holds %q, want %q", got, timefmt.Format(due))
	}
	do(t, ctx, "reschedule to the printed time", chromedp.Click(chromedp.ID("action-reschedule")), chromedp.WaitVisible(chromedp.ID("confirm-yes")),
		chromedp.Click(chromedp.ID("confirm-yes")), chromedp.WaitVisible(chromedp.ID("timer-state")))
	if tm, err := q.Get(context.Background(), "esc"); err != nil || !tm.Due.Equal(due) {
		t.Errorf("after rescheduling to the printed time: due %v (%v), want %v", tm.Due, err, due)
	}

	// A bare number is refused, not read as 1970.
	do(t, ctx, "filter by a bare number", chromedp.Navigate(base+"/timers"), chromedp.WaitVisible(chromedp.ID("f-from")),
		chromedp.SendKeys(chromedp.ID("f-from"), "1796238000"), chromedp.Click(chromedp.ID("f-apply")), chromedp.WaitVisible(chromedp.ID("filter-error")))
	if got := text(t, ctx, "filter-error"); !strings.Contains(got, `"1796238000" is a number without a unit`) || !strings.Contains(got, "1796238000s") {
		t.Errorf("filter error %q", got)
	}
	do(t, ctx, "filter by Unix seconds", chromedp.Navigate(base+"/timers?from=1796238000s"), chromedp.WaitVisible(chromedp.ID("filters")))
	if eval[bool](t, ctx, `!!document.getElementById("filter-error")`) {
		t.Errorf("Unix seconds with their unit refused: %s", text(t, ctx, "filter-error"))
	}

	// The live tail previews a binary payload the same way.
	do(t, ctx, "open the tail", chromedp.Navigate(base+"/tail"), chromedp.WaitVisible(chromedp.ID("tail")))
	waitJS(t, ctx, "the event stream to connect", `document.getElementById("live-status").textContent === "live"`)
	if _, err := q.Schedule(context.Background(), "bin-now", time.Now().Add(-time.Millisecond), bin); err != nil {
		t.Fatal(err)
	}
	if res, err := q.Engine().Claim(context.Background(), 10); err != nil || len(res.Fired) == 0 {
		t.Fatalf("claim: %v %v", res, err)
	}
	waitJS(t, ctx, "bin-now in the live tail", `document.querySelector("#tail-body tr.new td.id")?.textContent === "bin-now"`)
	if got := eval[string](t, ctx, `document.querySelector("#tail-body tr.new td.payload")?.textContent ?? ""`); got != "<40 bytes: 00070e151c232a31383f464d545b6269…>" {
		t.Errorf("tail payload %q", got)
	}
}
