package ui_test

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/queue"
	"github.com/timerq/timerq/ui"
)

// fireFlow schedules n timers of flow key key, due already, and fires
// them.
func fireFlow(t *testing.T, q *queue.Queue, key string, n int) {
	t.Helper()
	fireFlowTo(t, q, "", key, n)
}

// fireFlowTo is fireFlow for timers that deliver to endpoint.
func fireFlowTo(t *testing.T, q *queue.Queue, endpoint, key string, n int) {
	t.Helper()
	ctx := context.Background()
	var batch []queue.NewTimer
	for i := range n {
		batch = append(batch, queue.NewTimer{ID: fmt.Sprintf("f%s%d-%d", endpoint, len(key), i), Due: time.Now().Add(-time.Second),
			Payload: []byte("p"), FlowKey: key, Endpoint: endpoint})
	}
	if _, err := q.ScheduleBatch(ctx, batch); err != nil {
		t.Fatal(err)
	}
	fired := 0
	for fired < n {
		res, err := q.Engine().Claim(ctx, 100)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Fired) == 0 {
			t.Fatalf("claimed %d of %d", fired, n)
		}
		fired += len(res.Fired)
	}
}

// flowRows returns the flows table's rows as "key|parked|in flight|rate|max|policy"
// with the markup stripped.
func flowRows(t *testing.T, body string) []string {
	t.Helper()
	tbody := regexp.MustCompile(`(?s)<table id="flows">.*?<tbody>(.*?)</tbody>`).FindStringSubmatch(body)
	if tbody == nil {
		return nil
	}
	tag := regexp.MustCompile(`<[^>]*>`)
	var rows []string
	for _, tr := range regexp.MustCompile(`(?s)<tr>(.*?)</tr>`).FindAllStringSubmatch(tbody[1], -1) {
		var cells []string
		for _, td := range regexp.MustCompile(`(?s)<td[^>]*>(.*?)</td>`).FindAllStringSubmatch(tr[1], -1) {
			cells = append(cells, strings.TrimSpace(tag.ReplaceAllString(td[1], "")))
		}
		rows = append(rows, strings.Join(cells, "|"))
	}
	return rows
}

// TestFlowsPage: a key held to two in flight with three fires parked, a
// key under the namespace's default policy and one under an endpoint's
// default show with their numbers and policies, the largest backlog
// first, a key's markup as text; ?top bounds the rows and counts the rest;
// another group has none.
func TestFlowsPage(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		e := newEnv(t, b, ui.Options{})
		if _, body := e.Get(t, "/flows"); !strings.Contains(body, `id="flows-empty"`) || !strings.Contains(body, "timerq-deliver") {
			t.Fatalf("flows page before any flow:\n%s", body)
		}
		const evil = `<b>acme</b>&"`
		secret := queue.Secret(queue.SecretPrefix + strings.Repeat("QUFB", 8))
		if _, err := e.q.Endpoints().Put(ctx, queue.Endpoint{Name: "billing", URL: "https://billing.example.com/", Secrets: []queue.Secret{secret}}, nil); err != nil {
			t.Fatal(err)
		}
		for _, p := range []queue.FlowPolicy{
			{Key: "big", Rate: 100, Period: time.Second, MaxInFlight: 2},
			{Rate: 1000, Period: time.Second, MaxInFlight: 1},
			{Endpoint: "billing", Rate: 50, Period: time.Second, MaxInFlight: 1},
		} {
			if err := e.q.Flows().PutPolicy(ctx, p); err != nil {
				t.Fatal(err)
			}
		}
		fireFlow(t, e.q, "big", 5)
		fireFlow(t, e.q, evil, 3)
		fireFlowTo(t, e.q, "billing", "big", 5)
		ds, err := e.q.Lease(ctx, "timerq-deliver", "c1", queue.LeaseOptions{Lease: time.Minute, Count: 50})
		if err != nil {
			t.Fatal(err)
		}
		if len(ds) != 4 {
			t.Fatalf("leased %d, want 2 of big, 1 of %s and 1 of big to billing", len(ds), evil)
		}
		resp, body := e.Get(t, "/flows")
		if resp.StatusCode != 200 {
			t.Fatalf("GET /flows = %d\n%s", resp.StatusCode, body)
		}
		want := []string{
			"billing|big|4|1 full|50 per 1s (one every 20ms)|1|endpoint billing default",
			"-|big|3|2 full|100 per 1s (one every 10ms)|2|namespace",
			"-|&lt;b&gt;acme&lt;/b&gt;&amp;&#34;|2|1 full|1000 per 1s (one every 1ms)|1|namespace default",
		}
		if got := flowRows(t, body); strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("flows rows:\n%s\nwant:\n%s\npage:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"), body)
		}
		for _, s := range []string{`id="flow-keys">3<`, `id="flow-backlog">9<`, `id="flow-inflight">4<`, `class="active">Flows</a>`} {
			if !strings.Contains(body, s) {
				t.Errorf("flows page lacks %q", s)
			}
		}
		if strings.Contains(body, "<b>acme") {
			t.Error("the flows page renders markup from a flow key")
		}
		_, body = e.Get(t, "/flows?top=1")
		if got := flowRows(t, body); len(got) != 1 || !strings.HasPrefix(got[0], "billing|big|4|") {
			t.Errorf("top=1 rows %q, want billing's big alone", got)
		}
		if !strings.Contains(body, "and 2 more keys with a backlog") || !strings.Contains(body, `href="/flows?group=timerq-deliver&amp;top=1000"`) {
			t.Errorf("top=1 does not count the rest:\n%s", body)
		}
		if _, body := e.Get(t, "/flows?group=other"); !strings.Contains(body, `id="flows-empty"`) {
			t.Errorf("another group shows flows:\n%s", body)
		}
		for _, bad := range []string{"/flows?top=0", "/flows?top=x", "/flows?group=a%20b"} {
			if resp, _ := e.Get(t, bad); resp.StatusCode != 400 {
				t.Errorf("GET %s = %d, want 400", bad, resp.StatusCode)
			}
		}
		if _, body := e.Get(t, "/"); !strings.Contains(body, `href="/flows"`) {
			t.Error("the overview has no link to the flows page")
		}
	})
}
