package ui_test

import (
	"context"
	"fmt"
	"html"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/timerq/timerq/deliver/dispatch"
	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/queue"
	"github.com/timerq/timerq/ui"
)

// scheduleOwned schedules the timers of the owner tests: o-1 and o-2 of
// owner wf/1 (o-1 with a deadline), other of another owner, all labelled
// tenant=acme, and plain.
func scheduleOwned(t *testing.T, q *queue.Queue) {
	t.Helper()
	due := time.Now().Add(time.Hour)
	acme := map[string]string{"tenant": "acme"}
	if _, err := q.ScheduleBatch(context.Background(), []queue.NewTimer{
		{ID: "o-1", Due: due, Owner: "wf/1", Labels: acme, FireWithin: time.Minute},
		{ID: "o-2", Due: due.Add(time.Minute), Owner: "wf/1", Labels: map[string]string{"tenant": "acme", "kind": "sla"}},
		{ID: "other", Due: due, Owner: "wf/2", Labels: acme},
		{ID: "plain", Due: due},
	}); err != nil {
		t.Fatal(err)
	}
}

// TestTimerPagesShowOwnerAndLabels: a timer's page shows its owner, the
// epoch it was scheduled under, its labels and deadline, and a timer
// without them shows none; the list shows each timer's owner and labels,
// and filters by owner; a read-only dashboard offers no bulk cancel.
func TestTimerPagesShowOwnerAndLabels(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		e := newEnv(t, b, ui.Options{})
		scheduleOwned(t, e.q)
		o1, err := e.q.Get(context.Background(), "o-1")
		if err != nil {
			t.Fatal(err)
		}
		resp, body := e.Get(t, "/timer?id=o-1")
		if resp.StatusCode != 200 {
			t.Fatalf("GET /timer = %d\n%s", resp.StatusCode, body)
		}
		for _, want := range []string{`id="timer-owner">wf/1<`, `id="timer-epoch">0<`, `id="timer-labels">tenant=acme<`,
			`id="timer-deadline">` + uiTime(o1.Deadline), `href="/timers?owner=wf%2F1"`} {
			if !strings.Contains(body, want) {
				t.Errorf("timer page lacks %q:\n%s", want, body)
			}
		}
		if strings.Contains(body, "action-cancel-owner") {
			t.Errorf("read-only timer page offers to cancel the owner's timers:\n%s", body)
		}
		if _, body := e.Get(t, "/timer?id=plain"); strings.Contains(body, "timer-owner") || strings.Contains(body, "timer-labels") || strings.Contains(body, "timer-deadline") {
			t.Errorf("a timer without an owner, labels or deadline shows them:\n%s", body)
		}
		_, body = e.Get(t, "/timers")
		list := section(t, body, "timers")
		for _, want := range []string{"<code>wf/1</code>", "kind=sla, tenant=acme", "<code>wf/2</code>"} {
			if !strings.Contains(list, want) {
				t.Errorf("timers list lacks %q:\n%s", want, list)
			}
		}
		_, body = e.Get(t, "/timers?owner="+url.QueryEscape("wf/1"))
		list = section(t, body, "timers")
		if !strings.Contains(list, ">o-1<") || !strings.Contains(list, ">o-2<") || strings.Contains(list, ">other<") || strings.Contains(list, ">plain<") {
			t.Errorf("timers of owner wf/1:\n%s", list)
		}
		if !strings.Contains(body, `id="f-owner" value="wf/1"`) || strings.Contains(body, "action-bulk-cancel") {
			t.Errorf("the owner filter is not kept, or a read-only page offers a bulk cancel:\n%s", body)
		}
	})
}

// TestBulkCancelByOwnerAndLabelForm: the bulk cancel form takes an owner
// and a label; the confirmation names the filter and carries it, its POST
// cancels the timers it selects and no other, and the job's pages show
// its owner and labels; a label that is not KEY=VALUE is refused.
func TestBulkCancelByOwnerAndLabelForm(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		e := newEnv(t, b, ui.Options{AllowWrites: true})
		scheduleOwned(t, e.q)
		_, body := e.Get(t, "/cancel-jobs")
		if !strings.Contains(body, `id="bulk-owner"`) || !strings.Contains(body, `id="bulk-label"`) {
			t.Fatalf("the bulk cancel form takes no owner or label:\n%s", body)
		}
		if _, body := e.Get(t, "/timer?id=o-1"); !strings.Contains(body, `id="action-cancel-owner"`) ||
			!strings.Contains(body, `href="/cancel-jobs/confirm?owner=wf%2F1"`) {
			t.Errorf("the timer page does not offer to cancel its owner's timers:\n%s", body)
		}
		if _, body := e.Get(t, "/timers?owner=wf%2F1"); !strings.Contains(body, `href="/cancel-jobs/confirm?owner=wf%2F1"`) {
			t.Errorf("the timers of an owner do not offer their bulk cancel:\n%s", body)
		}
		// The form's empty fields come along: an empty prefix is none.
		confirm := "/cancel-jobs/confirm?prefix=&owner=wf%2F1&label=tenant%3Dacme"
		_, body = e.Get(t, confirm)
		for _, want := range []string{`Filter <code id="confirm-id">owner &#34;wf/1&#34;, labels tenant=&#34;acme&#34;</code>`,
			`name="owner" value="wf/1"`, `name="label" value="tenant=acme"`} {
			if !strings.Contains(body, want) {
				t.Errorf("the confirmation lacks %q:\n%s", want, body)
			}
		}
		resp, _ := e.Act(t, confirm)
		loc := resp.Header.Get("Location")
		m := regexp.MustCompile(`^/cancel-job\?done=bulk-cancelled&id=([0-9a-z-]+)$`).FindStringSubmatch(loc)
		if resp.StatusCode != 303 || m == nil {
			t.Fatalf("bulk cancel POST = %d to %q, want 303 to the job", resp.StatusCode, loc)
		}
		for id, want := range map[string]queue.State{"o-1": queue.StateCancelled, "o-2": queue.StateCancelled,
			"other": queue.StateScheduled, "plain": queue.StateScheduled} {
			if tm, err := e.q.Get(ctx, id); err != nil || tm.State != want {
				t.Errorf("%s is %s (%v) after the bulk cancel of owner wf/1, label tenant=acme; want %s", id, tm.State, err, want)
			}
		}
		_, body = e.Get(t, loc)
		for _, want := range []string{`id="job-owner">wf/1<`, `id="job-labels">tenant=acme<`, `id="job-cancelled">2 `} {
			if !strings.Contains(body, want) {
				t.Errorf("the job page lacks %q:\n%s", want, body)
			}
		}
		if strings.Contains(body, `id="job-prefix"`) {
			t.Errorf("a job without a prefix shows one:\n%s", body)
		}
		_, body = e.Get(t, "/cancel-jobs")
		if list := section(t, body, "cancel-jobs"); !strings.Contains(list, `<code>wf/1</code>`) || !strings.Contains(list, `class="job-labels">tenant=acme<`) {
			t.Errorf("the jobs list lacks the job's owner and labels:\n%s", list)
		}

		resp, body = e.Get(t, "/cancel-jobs/confirm?label=tenant")
		if resp.StatusCode != 400 || !strings.Contains(body, `label &#34;tenant&#34; is not KEY=VALUE`) {
			t.Errorf("a label without '=' = %d, want 400 saying so:\n%s", resp.StatusCode, body)
		}
		if jobs, err := e.q.CancelJobs().List(ctx); err != nil || len(jobs) != 1 {
			t.Errorf("%d jobs after a refused label, want 1 (%v)", len(jobs), err)
		}
	})
}

// TestDeadLettersShowOwner: the dead letters of the groups page, and the
// dead-lettered deliveries of the deliveries page, show the owner each fire
// carried and the epoch it was scheduled under; a dead letter of a timer
// without an owner shows none.
func TestDeadLettersShowOwner(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		for _, page := range []struct{ path, table, group, endpoint string }{
			{"/groups", "dead", "g", ""},
			{"/deliveries", "deliveries", dispatch.DefaultGroup, "billing"},
		} {
			t.Run(page.table, func(t *testing.T) {
				ctx := context.Background()
				e := newDeliveryEnv(t, b, 1, ui.Options{})
				if _, err := e.q.BumpEpoch(ctx, "wf/1", queue.BumpOptions{}); err != nil {
					t.Fatal(err)
				}
				due := time.Now().Add(-time.Second)
				if _, err := e.q.ScheduleBatch(ctx, []queue.NewTimer{{ID: "o-dead", Due: due, Owner: "wf/1", Endpoint: page.endpoint},
					{ID: "plain-dead", Due: due, Endpoint: page.endpoint}}); err != nil {
					t.Fatal(err)
				}
				if res, err := e.q.Engine().Claim(ctx, 10); err != nil || len(res.Fired) != 2 {
					t.Fatalf("claim: %+v %v", res, err)
				}
				o := queue.LeaseOptions{Lease: time.Minute}
				ds, err := e.q.Lease(ctx, page.group, "c", o)
				if err != nil || len(ds) != 2 {
					t.Fatalf("lease: %+v %v", ds, err)
				}
				for _, d := range ds {
					if _, err := e.q.Release(ctx, page.group, d.DeliveryID, queue.ReleaseOptions{DeadLetter: true}, o); err != nil {
						t.Fatal(err)
					}
				}
				_, body := e.Get(t, page.path)
				rows := regexp.MustCompile(`(?s)<tr>.*?</tr>`).FindAllString(section(t, body, page.table), -1)
				owned, plain := "", ""
				for _, r := range rows {
					switch {
					case strings.Contains(r, ">o-dead<"):
						owned = r
					case strings.Contains(r, ">plain-dead<"):
						plain = r
					}
				}
				if !strings.Contains(owned, `<td class="owner"><code>wf/1</code> <span class="muted">at epoch 1</span></td>`) {
					t.Errorf("o-dead's dead letter does not show owner wf/1 at epoch 1:\n%s", owned)
				}
				if !strings.Contains(plain, `<td class="owner"></td>`) {
					t.Errorf("plain-dead's dead letter shows an owner, or no owner cell:\n%s", plain)
				}
			})
		}
	})
}

// TestPrefixFilterWithOwnerIsBounded: with an owner as well as an ID
// prefix, a page examines at most the budget of timers, the owner's and
// others', and says how many; a rare owner's timer is reached by Next.
// When the owner was passed to List, which drops other owners' timers
// after reading its page, only the owner's counted: one request listed
// all 12,001 timers and said "(1 examined here)".
func TestPrefixFilterWithOwnerIsBounded(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		// What is under test is the budget, not speed: miniredis under
		// -race may take longer than the default 5 s for a page (see
		// TestPrefixFilterIsBounded).
		e := newEnv(t, b, ui.Options{Timeout: time.Minute})
		now := time.Now()
		var batch []queue.NewTimer
		for i := range 12000 {
			batch = append(batch, queue.NewTimer{ID: fmt.Sprintf("p-%05d", i), Due: now.Add(time.Hour + time.Duration(i)*time.Second)})
		}
		later := now.Add(48 * time.Hour)
		batch = append(batch,
			queue.NewTimer{ID: "p-wf", Due: later, Owner: "wf"},
			queue.NewTimer{ID: "p-other", Due: later, Owner: "wf2"})
		if _, err := e.q.ScheduleBatch(context.Background(), batch); err != nil {
			t.Fatal(err)
		}
		examined := regexp.MustCompile(`\((\d+) examined here\)`)
		nextLink := regexp.MustCompile(`href="([^"]+)" id="next-page"`)
		page := "/timers?prefix=p-&owner=wf"
		total := 0
		for n := 1; ; n++ {
			resp, body := e.Get(t, page)
			if resp.StatusCode != 200 {
				t.Fatalf("GET %s = %d\n%s", page, resp.StatusCode, body)
			}
			m := examined.FindStringSubmatch(body)
			if m == nil {
				t.Fatalf("page %d does not say how many timers it examined:\n%s", n, body)
			}
			scanned, _ := strconv.Atoi(m[1])
			total += scanned
			next := nextLink.FindStringSubmatch(body)
			if next == nil {
				if scanned > 5000 || total != 12002 {
					t.Errorf("last page %d examined %d (%d in all), want at most 5000 and 12002 in all", n, scanned, total)
				}
				list := section(t, body, "timers")
				if !strings.Contains(list, ">p-wf<") || strings.Contains(list, ">p-other<") || strings.Contains(list, ">p-00000<") {
					t.Errorf("last page should list p-wf alone:\n%s", list)
				}
				break
			}
			if scanned != 5000 || strings.Contains(body, ">p-wf<") || !strings.Contains(body, `id="no-timers"`) {
				t.Fatalf("page %d should examine 5000 timers, find none of owner wf and offer Next (examined %s):\n%s", n, m[1], body)
			}
			if n == 3 {
				t.Fatalf("a third page offers Next: pages examine fewer than the budget")
			}
			page = html.UnescapeString(next[1])
		}
		// An owner List refuses is refused with a prefix too.
		if resp, body := e.Get(t, "/timers?prefix=p-&owner=%01"); resp.StatusCode != 400 {
			t.Errorf("a control character as owner: %d, want 400\n%s", resp.StatusCode, body)
		}
	})
}
