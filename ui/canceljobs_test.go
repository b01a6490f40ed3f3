package ui_test

import (
	"context"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/queue"
	"github.com/timerq/timerq/ui"
)

// TestCancelJobsPage: a finished bulk cancel is listed with its prefix,
// state, counts and times, linked to its page, reached from every page's
// navigation; a read-only dashboard shows no form, refuses the
// confirmation and the POST, and nothing changes.
func TestCancelJobsPage(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		e := newEnv(t, b, ui.Options{})
		if resp, body := e.Get(t, "/cancel-jobs"); resp.StatusCode != 200 || !strings.Contains(body, `id="no-cancel-jobs"`) {
			t.Fatalf("GET /cancel-jobs with no job = %d:\n%s", resp.StatusCode, body)
		}
		schedule(t, e.q, "job-1", time.Hour, "")
		schedule(t, e.q, "job-2", time.Hour, "")
		schedule(t, e.q, "job-3", time.Hour, "")
		schedule(t, e.q, "job-4", -time.Second, "")
		schedule(t, e.q, "other", time.Hour, "")
		if _, err := e.q.Cancel(ctx, "job-3"); err != nil {
			t.Fatal(err)
		}
		if res, err := e.q.Engine().Claim(ctx, 10); err != nil || len(res.Fired) != 1 || res.Fired[0].ID != "job-4" {
			t.Fatalf("claim = %+v, %v; want job-4 fired", res.Fired, err)
		}
		j, err := e.q.CancelMatching(ctx, queue.CancelFilter{IDPrefix: "job-"})
		if err != nil || j.State != queue.CancelJobDone {
			t.Fatalf("CancelMatching = %+v, %v", j, err)
		}

		resp, page := e.Get(t, "/cancel-jobs")
		if resp.StatusCode != 200 {
			t.Fatalf("GET /cancel-jobs = %d\n%s", resp.StatusCode, page)
		}
		list := section(t, page, "cancel-jobs")
		for _, want := range []string{`href="/cancel-job?id=` + j.ID + `"`, "<code>job-</code>", `class="st st-done"`,
			`class="job-cancelled">2<`, `class="job-fired">1<`, `class="job-already">1<`, `class="job-skipped">0<`,
			uiTime(j.Created), uiTime(j.Finished)} {
			if !strings.Contains(list, want) {
				t.Errorf("cancel jobs list lacks %q:\n%s", want, list)
			}
		}
		if !strings.Contains(page, `class="active">Cancel jobs</a>`) {
			t.Error("the nav does not mark Cancel jobs")
		}
		if _, body := e.Get(t, "/"); !strings.Contains(body, `href="/cancel-jobs"`) {
			t.Error("the overview has no link to the cancel jobs")
		}

		resp, body := e.Get(t, "/cancel-job?id="+j.ID)
		if resp.StatusCode != 200 {
			t.Fatalf("GET /cancel-job = %d\n%s", resp.StatusCode, body)
		}
		for _, want := range []string{`id="job-state">done<`, `id="job-prefix">job-<`, `id="job-cancelled">2 `, `id="job-fired">1 `,
			`id="job-already">1 `, `id="job-skipped">0 `, `id="job-progress">1 of 1 shards`, `id="job-finished">` + uiTime(j.Finished),
			`class="active">Cancel jobs</a>`} {
			if !strings.Contains(body, want) {
				t.Errorf("job page lacks %q:\n%s", want, body)
			}
		}
		if resp, body := e.Get(t, "/cancel-job?id=nope-1"); resp.StatusCode != 404 || !strings.Contains(body, "bulk cancel job not found") {
			t.Errorf("unknown job = %d, want 404 saying not found:\n%s", resp.StatusCode, body)
		}

		// Read-only: no form, and neither the confirmation nor the POST.
		if strings.Contains(page, `id="bulk-cancel"`) || strings.Contains(page, `name="csrf"`) {
			t.Errorf("read-only cancel jobs page offers the form:\n%s", page)
		}
		if _, body := e.Get(t, "/timers?prefix=other"); strings.Contains(body, "action-bulk-cancel") {
			t.Errorf("read-only timers page offers a bulk cancel:\n%s", body)
		}
		if resp, _ := e.Get(t, "/cancel-jobs/confirm?prefix=other"); resp.StatusCode != 403 {
			t.Errorf("bulk cancel confirmation in read-only mode: %d, want 403", resp.StatusCode)
		}
		resp, body = e.Post(t, "/cancel-jobs/start", url.Values{"prefix": {"other"}, "csrf": {"x"}}, nil)
		if resp.StatusCode != 403 || !strings.Contains(body, "this dashboard is read-only") {
			t.Errorf("POST /cancel-jobs/start in read-only mode: %d, want 403 saying read-only:\n%s", resp.StatusCode, body)
		}
		if tm, _ := e.q.Get(ctx, "other"); tm.State != queue.StateScheduled {
			t.Errorf("other is %s after a refused bulk cancel", tm.State)
		}
		if jobs, err := e.q.CancelJobs().List(ctx); err != nil || len(jobs) != 1 {
			t.Errorf("%d jobs after a refused bulk cancel, want 1 (%v)", len(jobs), err)
		}
	})
}

// TestBulkCancelAction: the form, through its confirmation, starts a job
// that cancels the timers with the prefix and no other, and shows the job;
// an empty prefix is refused with the library's error, on the
// confirmation and on a POST, and starts nothing.
func TestBulkCancelAction(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		e := newEnv(t, b, ui.Options{AllowWrites: true})
		for _, id := range []string{"ord-1", "ord-2", "ord-10", "order", "x-ord-1"} {
			schedule(t, e.q, id, time.Hour, "")
		}
		_, body := e.Get(t, "/cancel-jobs")
		if !strings.Contains(body, `<form method="get" action="/cancel-jobs/confirm"`) || !strings.Contains(body, `id="bulk-prefix"`) {
			t.Fatalf("writable cancel jobs page has no form:\n%s", body)
		}
		if _, body := e.Get(t, "/timers?prefix=ord-"); !strings.Contains(body, `href="/cancel-jobs/confirm?prefix=ord-"`) {
			t.Errorf("timers page filtered by prefix does not offer its bulk cancel:\n%s", body)
		}
		_, body = e.Get(t, "/cancel-jobs/confirm?prefix=ord-")
		if !strings.Contains(body, `ID prefix <code id="confirm-id">ord-</code>`) || !strings.Contains(body, `name="prefix" value="ord-"`) {
			t.Errorf("the confirmation does not name the prefix:\n%s", body)
		}
		if tm, _ := e.q.Get(ctx, "ord-1"); tm.State != queue.StateScheduled {
			t.Fatalf("the confirmation page cancelled: ord-1 is %s", tm.State)
		}

		resp, _ := e.Act(t, "/cancel-jobs/confirm?prefix=ord-")
		loc := resp.Header.Get("Location")
		m := regexp.MustCompile(`^/cancel-job\?done=bulk-cancelled&id=([0-9a-z-]+)$`).FindStringSubmatch(loc)
		if resp.StatusCode != 303 || m == nil {
			t.Fatalf("bulk cancel POST = %d to %q, want 303 to the job", resp.StatusCode, loc)
		}
		for id, want := range map[string]queue.State{"ord-1": queue.StateCancelled, "ord-2": queue.StateCancelled, "ord-10": queue.StateCancelled,
			"order": queue.StateScheduled, "x-ord-1": queue.StateScheduled} {
			if tm, err := e.q.Get(ctx, id); err != nil || tm.State != want {
				t.Errorf("%s is %s (%v) after the bulk cancel of ord-, want %s", id, tm.State, err, want)
			}
		}
		_, body = e.Get(t, loc)
		for _, want := range []string{`id="notice">Bulk cancel started`, `id="job-id">` + m[1] + `<`, `id="job-state">done<`,
			`id="job-prefix">ord-<`, `id="job-cancelled">3 `} {
			if !strings.Contains(body, want) {
				t.Errorf("the job page after the POST lacks %q:\n%s", want, body)
			}
		}

		// An empty prefix: refused on the confirmation, and on a POST
		// sent anyway, with the library's words.
		resp, body = e.Get(t, "/cancel-jobs/confirm?prefix=")
		if resp.StatusCode != 400 || !strings.Contains(body, `id="error">timerq: invalid bulk cancel filter: the filter is empty`) {
			t.Errorf("confirmation of an empty prefix = %d, want 400 with the library's error:\n%s", resp.StatusCode, body)
		}
		_, form := e.Get(t, "/cancel-jobs/confirm?prefix=ord-")
		csrf := csrfField.FindStringSubmatch(form)
		if csrf == nil {
			t.Fatalf("the bulk cancel confirmation has no CSRF token:\n%s", form)
		}
		resp, body = e.Post(t, "/cancel-jobs/start", url.Values{"prefix": {""}, "csrf": {csrf[1]}}, nil)
		if resp.StatusCode != 400 || !strings.Contains(body, "the filter is empty") {
			t.Errorf("POST of an empty prefix = %d, want 400 with the library's error:\n%s", resp.StatusCode, body)
		}
		if jobs, err := e.q.CancelJobs().List(ctx); err != nil || len(jobs) != 1 {
			t.Errorf("%d jobs after an empty prefix, want 1 (%v)", len(jobs), err)
		}
		if tm, _ := e.q.Get(ctx, "order"); tm.State != queue.StateScheduled {
			t.Errorf("order is %s after an empty prefix", tm.State)
		}

		// A prefix holding markup shows as text.
		const evil = `<b>x`
		_, body = e.Get(t, "/cancel-jobs/confirm?prefix="+url.QueryEscape(evil))
		if strings.Contains(body, "<b>x") || !strings.Contains(body, "&lt;b&gt;x") {
			t.Errorf("the confirmation renders markup from the prefix:\n%s", body)
		}
	})
}
