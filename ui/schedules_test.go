package ui_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/internal/uitest"
	"github.com/timerq/timerq/queue"
	"github.com/timerq/timerq/ui"
)

// putRecurring creates a schedule or fails the test.
func putRecurring(t *testing.T, q *queue.Queue, r queue.Recurring) queue.RecurringInfo {
	t.Helper()
	in, created, err := q.Recurring().Put(context.Background(), r)
	if err != nil || !created {
		t.Fatalf("PutRecurring(%s) = %v, %v", r.ID, created, err)
	}
	return in
}

// uiTime is how the dashboard writes a time.
func uiTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

// section returns the part of body from the element with the id to the
// end of its table or list.
func section(t *testing.T, body, id string) string {
	t.Helper()
	i := strings.Index(body, `id="`+id+`"`)
	if i < 0 {
		t.Fatalf("page has no #%s:\n%s", id, body)
	}
	rest := body[i:]
	if j := regexp.MustCompile(`</(table|ol)>`).FindStringIndex(rest); j != nil {
		rest = rest[:j[1]]
	}
	return rest
}

// TestSchedulePages: the list shows each schedule's spec, zone, state,
// policies and next due; a schedule's page shows its record, the next 5
// occurrences that queue.RecurringTimers.Get (and so `timerctl schedules get`) computes,
// its armed occurrences linked to their timers, and a fired one.
func TestSchedulePages(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		e := newEnv(t, b, ui.Options{})
		berlin, err := time.LoadLocation("Europe/Berlin")
		if err != nil {
			t.Skip("no tz database:", err)
		}
		putRecurring(t, e.q, queue.Recurring{ID: "nightly", Spec: "30 3 * * *", Location: berlin,
			Payload: []byte(`{"report":"daily"}`), Jitter: 5 * time.Minute})
		hb := putRecurring(t, e.q, queue.Recurring{ID: "heartbeat", Every: time.Hour, CatchUp: queue.CatchUpAll, Ahead: 3})

		resp, body := e.Get(t, "/schedules")
		if resp.StatusCode != 200 {
			t.Fatalf("GET /schedules = %d\n%s", resp.StatusCode, body)
		}
		list := section(t, body, "schedules")
		for _, want := range []string{`href="/schedule?id=nightly"`, `href="/schedule?id=heartbeat"`, "<code>30 3 * * *</code>",
			"Europe/Berlin", "<code>every 1h0m0s</code>", `class="st st-active"`, "jitter 5m0s", "catch-up all", "ahead 3",
			uiTime(hb.Pending[0].Due), `{&#34;report&#34;:&#34;daily&#34;}`} {
			if !strings.Contains(list, want) {
				t.Errorf("schedules list lacks %q:\n%s", want, list)
			}
		}
		if strings.Contains(list, "catch-up once") || strings.Count(list, "catch-up limit 10") != 1 {
			t.Errorf("the list's policies should leave out defaults, and the catch-up limit but with catch-up all:\n%s", list)
		}
		if !strings.Contains(body, `class="active">Schedules</a>`) {
			t.Error("the nav does not mark Schedules")
		}
		if _, body := e.Get(t, "/"); !strings.Contains(body, `href="/schedules"`) {
			t.Error("the overview does not link the schedules")
		}

		in, err := e.q.Recurring().Get(ctx, "nightly")
		if err != nil || len(in.Next) != 5 || len(in.Pending) != 2 {
			t.Fatalf("GetRecurring = %+v, %v", in, err)
		}
		resp, body = e.Get(t, "/schedule?id=nightly")
		if resp.StatusCode != 200 {
			t.Fatalf("GET /schedule = %d\n%s", resp.StatusCode, body)
		}
		next := section(t, body, "next")
		if n := strings.Count(next, "<li>"); n != 5 {
			t.Errorf("%d next occurrences shown, want 5:\n%s", n, next)
		}
		for _, tm := range in.Next {
			if !strings.Contains(next, uiTime(tm)) {
				t.Errorf("next occurrences lack %s (GetRecurring's):\n%s", uiTime(tm), next)
			}
		}
		pending := section(t, body, "pending")
		for _, o := range in.Pending {
			link := `href="/timer?id=` + url.QueryEscape(o.ID) + `"`
			if !strings.Contains(pending, link) || !strings.Contains(pending, uiTime(o.Due)) {
				t.Errorf("armed occurrences lack %s (%s) due %s:\n%s", o.ID, link, uiTime(o.Due), pending)
			}
		}
		record := section(t, body, "record")
		for _, want := range []string{`id="schedule-state">active<`, `id="schedule-zone">Europe/Berlin<`, "<th>jitter</th><td>5m0s</td>",
			"<th>catch-up</th><td>once</td>", "<th>max count</th><td>no limit</td>", "<th>end</th><td>none</td>"} {
			if !strings.Contains(record, want) {
				t.Errorf("record lacks %q:\n%s", want, record)
			}
		}
		if strings.Contains(body, `id="actions"`) {
			t.Error("a read-only schedule page has actions")
		}

		// Fire heartbeat's first occurrence: it moves from armed to recent,
		// and its timer page links back to the schedule.
		first := hb.Pending[0]
		if _, err := e.q.FireNow(ctx, first.ID); err != nil {
			t.Fatal(err)
		}
		if res, err := e.q.Engine().Claim(ctx, 10); err != nil || len(res.Fired) != 1 {
			t.Fatalf("claim = %+v, %v", res, err)
		}
		_, body = e.Get(t, "/schedule?id=heartbeat")
		recent := section(t, body, "recent")
		if !strings.Contains(recent, url.QueryEscape(first.ID)) || !strings.Contains(recent, `st-fired`) {
			t.Errorf("recent occurrences lack the fired %s:\n%s", first.ID, body)
		}
		if strings.Contains(section(t, body, "pending"), url.QueryEscape(first.ID)) {
			t.Errorf("the fired %s is still listed as armed", first.ID)
		}
		_, body = e.Get(t, "/timer?id="+url.QueryEscape(first.ID))
		if !strings.Contains(body, `<a href="/schedule?id=heartbeat" id="timer-schedule">heartbeat</a>`) {
			t.Errorf("the occurrence's timer page does not link its schedule:\n%s", body)
		}

		if resp, body := e.Get(t, "/schedule?id=nope"); resp.StatusCode != 404 || !strings.Contains(body, "not found") {
			t.Errorf("unknown schedule: %d, want 404\n%s", resp.StatusCode, body)
		}
	})
}

// TestScheduleActions: pause, resume and delete through their confirmation
// pages change Redis, and the page offers only the actions that apply.
func TestScheduleActions(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		e := newEnv(t, b, ui.Options{AllowWrites: true})
		in := putRecurring(t, e.q, queue.Recurring{ID: "tick", Every: time.Minute})

		_, body := e.Get(t, "/schedule?id=tick")
		if !strings.Contains(body, `id="action-pause"`) || strings.Contains(body, `id="action-resume"`) {
			t.Fatalf("an active schedule should offer pause, not resume:\n%s", body)
		}
		_, body = e.Get(t, "/schedule/confirm?id=tick&action=pause")
		if !strings.Contains(body, `Schedule <code id="confirm-id">tick</code>`) {
			t.Errorf("the confirmation does not name the schedule:\n%s", body)
		}
		if got, _ := e.q.Recurring().Get(ctx, "tick"); got.State != queue.RecurringActive {
			t.Fatalf("the confirmation page changed the schedule: %s", got.State)
		}
		resp, _ := e.Act(t, "/schedule/confirm?id=tick&action=pause")
		if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/schedule?done=paused&id=tick" {
			t.Fatalf("pause: %d %s", resp.StatusCode, resp.Header.Get("Location"))
		}
		got, err := e.q.Recurring().Get(ctx, "tick")
		if err != nil || got.State != queue.RecurringPaused || len(got.Pending) != 0 {
			t.Fatalf("after pause: %s, %d pending, %v", got.State, len(got.Pending), err)
		}
		for _, o := range in.Pending {
			if tm, _ := e.q.Get(ctx, o.ID); tm.State != queue.StateCancelled {
				t.Errorf("occurrence %s is %s after pause, want cancelled", o.ID, tm.State)
			}
		}
		_, body = e.Get(t, "/schedule?id=tick&done=paused")
		if !strings.Contains(body, `id="notice">Schedule paused`) || !strings.Contains(body, `id="action-resume"`) || strings.Contains(body, `id="action-pause"`) {
			t.Errorf("a paused schedule's page should say so and offer resume, not pause:\n%s", body)
		}

		resp, _ = e.Act(t, "/schedule/confirm?id=tick&action=resume")
		if resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("resume: %d", resp.StatusCode)
		}
		if got, _ = e.q.Recurring().Get(ctx, "tick"); got.State != queue.RecurringActive || len(got.Pending) != queue.DefaultAhead {
			t.Fatalf("after resume: %s with %d pending", got.State, len(got.Pending))
		}

		resp, _ = e.Act(t, "/schedule/confirm?id=tick&action=delete")
		if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/schedules?done=deleted" {
			t.Fatalf("delete: %d %s", resp.StatusCode, resp.Header.Get("Location"))
		}
		if _, err := e.q.Recurring().Get(ctx, "tick"); !errors.Is(err, queue.ErrRecurringNotFound) {
			t.Fatalf("after delete: %v", err)
		}
		// The confirmation of a deleted schedule's action says it is gone.
		resp, body = e.Act(t, "/schedule/confirm?id=tick&action=pause")
		if resp.StatusCode != http.StatusNotFound || !strings.Contains(body, "not found") {
			t.Errorf("pause of a deleted schedule: %d\n%s", resp.StatusCode, body)
		}
		if resp, _ := e.Get(t, "/schedule/confirm?id=tick&action=explode"); resp.StatusCode != 404 {
			t.Errorf("unknown action: %d, want 404", resp.StatusCode)
		}
	})
}

// TestScheduleCSRFAndReadOnly: a pause POST without its token, with a wrong
// one or from another origin is refused; a read-only dashboard shows no
// action and refuses every schedule POST, and the schedule stays active.
func TestScheduleCSRFAndReadOnly(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		e := newEnv(t, b, ui.Options{AllowWrites: true})
		putRecurring(t, e.q, queue.Recurring{ID: "guarded", Every: time.Hour})
		_, body := e.Get(t, "/schedule/confirm?id=guarded&action=pause")
		m := csrfField.FindStringSubmatch(body)
		if m == nil {
			t.Fatalf("confirm page has no CSRF field:\n%s", body)
		}
		for name, tc := range map[string]struct {
			form url.Values
			hdr  map[string]string
		}{
			"no token":     {url.Values{"id": {"guarded"}}, nil},
			"wrong token":  {url.Values{"id": {"guarded"}, "csrf": {strings.Repeat("0", 64)}}, nil},
			"cross-origin": {url.Values{"id": {"guarded"}, "csrf": {m[1]}}, map[string]string{"Sec-Fetch-Site": "cross-site"}},
		} {
			for _, action := range []string{"pause", "delete"} {
				if resp, _ := e.Post(t, "/schedule/"+action, tc.form, tc.hdr); resp.StatusCode != 403 {
					t.Errorf("%s: POST %s = %d, want 403", name, action, resp.StatusCode)
				}
			}
		}
		if got, err := e.q.Recurring().Get(ctx, "guarded"); err != nil || got.State != queue.RecurringActive {
			t.Fatalf("after forged POSTs: %s, %v", got.State, err)
		}

		ro := newEnv(t, b, ui.Options{})
		putRecurring(t, ro.q, queue.Recurring{ID: "ro", Every: time.Hour})
		_, body = ro.Get(t, "/schedule?id=ro")
		if strings.Contains(body, `id="actions"`) || strings.Contains(body, "Pause…") || strings.Contains(body, `name="csrf"`) {
			t.Errorf("read-only schedule page offers actions:\n%s", body)
		}
		if resp, _ := ro.Get(t, "/schedule/confirm?id=ro&action=pause"); resp.StatusCode != 403 {
			t.Errorf("confirm page in read-only mode: %d, want 403", resp.StatusCode)
		}
		for _, action := range []string{"pause", "resume", "delete"} {
			resp, body := ro.Post(t, "/schedule/"+action, url.Values{"id": {"ro"}, "csrf": {m[1]}}, nil)
			if resp.StatusCode != 403 || !strings.Contains(body, "this dashboard is read-only") {
				t.Errorf("POST %s in read-only mode: %d, want 403 saying read-only", action, resp.StatusCode)
			}
		}
		if got, err := ro.q.Recurring().Get(ctx, "ro"); err != nil || got.State != queue.RecurringActive {
			t.Errorf("after refused POSTs: %s, %v", got.State, err)
		}
	})
}

// TestScheduleEscaping: a schedule ID and payload holding markup render as
// text in the list, the schedule page, its confirmation and its
// occurrences' timer pages.
func TestScheduleEscaping(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		e := newEnv(t, b, ui.Options{AllowWrites: true})
		const evil = `<script>alert(1)</script>"'><img src=x onerror=alert(2)>`
		in := putRecurring(t, e.q, queue.Recurring{ID: evil, Every: time.Hour, Payload: []byte(evil)})
		for _, p := range []string{"/schedules", "/schedule?id=" + url.QueryEscape(evil),
			"/schedule/confirm?action=pause&id=" + url.QueryEscape(evil), "/timer?id=" + url.QueryEscape(in.Pending[0].ID)} {
			resp, body := e.Get(t, p)
			if resp.StatusCode != 200 {
				t.Fatalf("GET %s = %d\n%s", p, resp.StatusCode, body)
			}
			if strings.Contains(body, "<script>alert") || strings.Contains(body, "<img src=x") {
				t.Errorf("GET %s renders markup from data:\n%s", p, body)
			}
			if !strings.Contains(body, "&lt;script&gt;alert(1)&lt;/script&gt;") {
				t.Errorf("GET %s does not show the ID as text:\n%s", p, body)
			}
		}
		resp, _ := e.Act(t, "/schedule/confirm?action=pause&id="+url.QueryEscape(evil))
		if resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("pausing the evil schedule: %d", resp.StatusCode)
		}
		if got, _ := e.q.Recurring().Get(context.Background(), evil); got.State != queue.RecurringPaused {
			t.Errorf("evil schedule is %s after pause", got.State)
		}
	})
}

// TestShardedNamespace: in a namespace of several shards the overview has a
// row per shard with its own counts and overdue backlog, and the schedule
// pages work or, while schedules need one shard, say so without breaking.
func TestShardedNamespace(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		e := newShardedEnv(t, b, 3)
		q := e.q
		for i := range 30 {
			in := time.Hour
			if i%4 == 0 {
				in = -time.Minute
			}
			schedule(t, q, fmt.Sprintf("s-%02d", i), in, "")
		}
		for i := range 5 {
			schedule(t, q, fmt.Sprintf("c-%d", i), time.Hour, "")
			if _, err := q.Cancel(ctx, fmt.Sprintf("c-%d", i)); err != nil {
				t.Fatal(err)
			}
		}
		st, err := q.Stats(ctx)
		if err != nil || len(st.Shards) != 3 {
			t.Fatalf("Stats = %+v, %v", st, err)
		}
		resp, body := e.Get(t, "/")
		if resp.StatusCode != 200 {
			t.Fatalf("overview = %d\n%s", resp.StatusCode, body)
		}
		rows := section(t, body, "shards")
		for k, s := range append(st.Shards, st) {
			name := fmt.Sprint(k)
			if k == 3 {
				name = "all"
			}
			row := regexp.MustCompile(`<tr id="shard-` + name + `"[^>]*>(.*?)</tr>`).FindStringSubmatch(rows)
			if row == nil {
				t.Fatalf("no row for shard %s:\n%s", name, rows)
			}
			for _, want := range []string{
				fmt.Sprintf(`class="scheduled">%d<`, s.Scheduled), fmt.Sprintf(`>%d</td><td>`, s.Overdue),
				fmt.Sprintf(`class="cancelled">%d<`, s.Cancelled)} {
				if !strings.Contains(row[1], want) {
					t.Errorf("shard %s row lacks %q: %s", name, want, row[1])
				}
			}
		}
		if st.Overdue != 8 || st.Scheduled != 30 || st.Cancelled != 5 {
			t.Errorf("totals = %+v, want 30 scheduled, 8 overdue, 5 cancelled", st)
		}
		if _, body := newEnv(t, b, ui.Options{}).Get(t, "/"); strings.Contains(body, `id="shard-0"`) {
			t.Error("the overview of one shard has per-shard rows")
		}

		// Schedules live in their own shard of a sharded namespace.
		resp, body = e.Get(t, "/schedules")
		if resp.StatusCode != 200 || !strings.Contains(body, `id="no-schedules"`) {
			t.Errorf("empty schedules list on 3 shards = %d\n%s", resp.StatusCode, body)
		}
		for _, id := range []string{"sharded-a", "sharded-b", "sharded-c", "sharded-d"} {
			if _, _, err := q.Recurring().Put(ctx, queue.Recurring{ID: id, Every: time.Hour}); err != nil {
				t.Fatal(err)
			}
			if resp, body := e.Get(t, "/schedule?id="+id); resp.StatusCode != 200 {
				t.Errorf("schedule page of %s on 3 shards = %d\n%s", id, resp.StatusCode, body)
			}
		}
		resp, body = e.Get(t, "/schedules")
		for _, id := range []string{"sharded-a", "sharded-b", "sharded-c", "sharded-d"} {
			if resp.StatusCode != 200 || !strings.Contains(body, id) {
				t.Errorf("schedules list on 3 shards = %d, want %s listed\n%s", resp.StatusCode, id, body)
			}
		}
	})
}

// newEnvHandler serves h, a dashboard of q, under prefix.
func newEnvHandler(t *testing.T, q *queue.Queue, h http.Handler, prefix string) *env {
	t.Helper()
	return &env{q: q, Client: uitest.Serve(t, h, prefix)}
}

// newShardedEnv is a dashboard with actions over a fresh namespace of
// shards shards.
func newShardedEnv(t *testing.T, b *redistest.Backend, shards int) *env {
	t.Helper()
	ns := redistest.Namespace(t)
	if _, err := queue.CreateNamespace(context.Background(), b.Client, ns, shards); err != nil {
		t.Fatal(err)
	}
	q, err := queue.New(b.Client, queue.Options{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Close() })
	h, err := ui.New(q, ui.Options{AllowWrites: true})
	if err != nil {
		t.Fatal(err)
	}
	return newEnvHandler(t, q, h, "")
}

// TestShardedStreams: on a namespace of several shards the fire rate, the
// live tail, the consumer groups and the dead letters cover every shard's
// streams, and a dead letter is requeued onto its own shard's stream.
func TestShardedStreams(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		const shards = 3
		e := newShardedEnv(t, b, shards)
		q := e.q
		// inShard returns an ID with the prefix that lives in shard k.
		inShard := func(prefix string, k int) string {
			for i := 0; ; i++ {
				id := fmt.Sprint(prefix, i)
				if got, _ := q.Inspect().ShardOf(ctx, id); got == k {
					return id
				}
			}
		}
		fire := func(ids ...string) {
			t.Helper()
			for _, id := range ids {
				schedule(t, q, id, -time.Second, "")
			}
			if res, err := q.Engine().Claim(ctx, 100); err != nil || len(res.Fired) != len(ids) {
				t.Fatalf("claim = %+v, %v; want %d fired", res, err, len(ids))
			}
		}
		var fired []string
		for k := range shards {
			fired = append(fired, inShard("fired-", k))
		}
		fire(fired...)

		_, body := e.Get(t, "/")
		if !strings.Contains(body, `<div class="sub">3 fires in`) {
			t.Errorf("the overview's fire rate does not count the fires of all 3 shards:\n%s", body)
		}
		_, body = e.Get(t, "/tail")
		for _, id := range fired {
			if !strings.Contains(body, ">"+id+"</a>") {
				t.Errorf("the tail page lacks %s, fired in shard %d", id, slices.Index(fired, id))
			}
		}
		src := regexp.MustCompile(`data-events="([^"]+)"`).FindStringSubmatch(body)
		if src == nil {
			t.Fatalf("the tail page has no event source:\n%s", body)
		}
		events := html.UnescapeString(src[1])
		if cur, _ := url.Parse(events); strings.Count(cur.Query().Get("after"), ",") != shards-1 {
			t.Fatalf("the tail's cursor %q does not hold one position per shard", cur.Query().Get("after"))
		}

		// The live tail: a fire in the last shard arrives, with the cursor
		// after it as its event ID.
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(sctx, "GET", e.URL+events, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		late := inShard("late-", shards-1)
		lines := bufio.NewScanner(resp.Body)
		lines.Scan() // "retry: 2000", sent once the stream is open
		fire(late)
		var id string
		for lines.Scan() {
			line := lines.Text()
			if v, ok := strings.CutPrefix(line, "id: "); ok {
				id = v
			}
			if strings.HasPrefix(line, "data: ") && strings.Contains(line, `"`+late+`"`) {
				break
			}
		}
		if sctx.Err() != nil {
			t.Fatalf("the live tail did not show %s, fired in shard %d", late, shards-1)
		}
		if strings.Count(id, ",") != shards-1 {
			t.Errorf("the tail event's ID %q is not a cursor over %d shards", id, shards)
		}

		// Dead letters of shards 1 and 2, listed together and requeued
		// onto their own shard.
		for k := 1; k < shards; k++ {
			if err := b.Client.XAdd(ctx, &redis.XAddArgs{Stream: q.Keys().DeadLetter(k), Values: []any{
				"id", fired[k], "due", "1", "fired", "2", "payload", "", "error", "broke", "attempts", "5", "group", "billing", "consumer", "c1", "stream_id", "1-0",
			}}).Err(); err != nil {
				t.Fatal(err)
			}
		}
		resp2, body := e.Get(t, "/groups")
		links := regexp.MustCompile(`href="(/dead/confirm\?[^"]+)"`).FindAllStringSubmatch(body, -1)
		if resp2.StatusCode != 200 || len(links) != 2 || !strings.Contains(body, "<th>Shard</th>") {
			t.Fatalf("groups page = %d with %d requeue links, want both shards' dead letters and a shard column:\n%s", resp2.StatusCode, len(links), body)
		}
		last := html.UnescapeString(links[1][1])
		if !strings.Contains(last, "shard=2") {
			t.Fatalf("the second dead letter's link %q does not name shard 2", last)
		}
		before, _ := b.Client.XLen(ctx, q.Keys().Stream(2)).Result()
		if resp, body := e.Act(t, last); resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("requeue: %d\n%s", resp.StatusCode, body)
		}
		if n, _ := b.Client.XLen(ctx, q.Keys().DeadLetter(2)).Result(); n != 0 {
			t.Errorf("shard 2 still has %d dead letters after requeue", n)
		}
		if n, _ := b.Client.XLen(ctx, q.Keys().DeadLetter(1)).Result(); n != 1 {
			t.Errorf("shard 1 has %d dead letters, want its 1 untouched", n)
		}
		if n, _ := b.Client.XLen(ctx, q.Keys().Stream(2)).Result(); n != before+1 {
			t.Errorf("shard 2's fire stream has %d entries after requeue, want %d", n, before+1)
		}
		if resp, _ := e.Get(t, "/groups?after=1-0"); resp.StatusCode != http.StatusBadRequest {
			t.Errorf("a one-shard cursor on 3 shards = %d, want 400", resp.StatusCode)
		}
		if resp, _ := e.Get(t, "/tail/events?after=1-0,2-0"); resp.StatusCode != http.StatusBadRequest {
			t.Errorf("a two-shard tail cursor on 3 shards = %d, want 400", resp.StatusCode)
		}
	})
}
