package ctl_test

import (
	"context"
	"html"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/timerq/timerq/cmd/internal/ctl"
	"github.com/timerq/timerq/deliver"
	"github.com/timerq/timerq/deliver/dispatch"
	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/internal/uitest"
	"github.com/timerq/timerq/queue"
	"github.com/timerq/timerq/ui"
)

// timerctl redrive requeues an endpoint's dead-lettered deliveries (a dry
// run lists them and changes nothing), refuses a call that names none or
// several ways, and says when a dead letter is not there.
func TestRedrive(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		c := newCLI(t, b)
		ctx := context.Background()
		for _, name := range []string{"billing", "ledger"} {
			if _, err := c.q.Endpoints().Put(ctx, queue.Endpoint{Name: name, URL: "https://example.com/" + name,
				Secrets: []queue.Secret{queue.Secret(deliver.GenerateSecret())}}, nil); err != nil {
				t.Fatal(err)
			}
		}
		past := time.Now().Add(-time.Second)
		if _, err := c.q.ScheduleBatch(ctx, []queue.NewTimer{{ID: "b1", Due: past, Endpoint: "billing", Owner: "wf-7"}, {ID: "l1", Due: past, Endpoint: "ledger"}}); err != nil {
			t.Fatal(err)
		}
		if res, err := c.q.Engine().Claim(ctx, 10); err != nil || len(res.Fired) != 2 {
			t.Fatalf("claim: %+v %v", res, err)
		}
		o := queue.LeaseOptions{Lease: time.Minute, MaxAttempts: 10, Count: 10}
		ds, err := c.q.Lease(ctx, "timerq-deliver", "d", o)
		if err != nil || len(ds) != 2 {
			t.Fatalf("lease: %v %v", ds, err)
		}
		for _, d := range ds {
			if _, err := c.q.Release(ctx, "timerq-deliver", d.DeliveryID, queue.ReleaseOptions{DeadLetter: true, Error: "gone: HTTP 410"}, o); err != nil {
				t.Fatal(err)
			}
		}
		deadOf := func() []string {
			page, err := c.q.Deliveries().DeadLetters(ctx, queue.DeadLetterListOptions{Limit: 10})
			dls := page.DeadLetters
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, d := range dls {
				ids = append(ids, d.Event.ID)
			}
			return ids
		}
		if out := c.ok("redrive", "--endpoint", "billing", "--dry-run").stdout; !strings.Contains(out, "b1") || strings.Contains(out, "l1") ||
			!strings.Contains(out, "1 would be redriven") {
			t.Errorf("dry run:\n%s", out)
		}
		if got := deadOf(); len(got) != 2 {
			t.Fatalf("the dry run changed the dead letters: %v", got)
		}
		// The table names a dead letter's owner and epoch when any has one.
		if out := c.ok("redrive", "--endpoint", "billing", "--dry-run").stdout; !regexp.MustCompile(`(?m)^DEAD LETTER\s+TIMER\s+OWNER\s+EPOCH\s+ENDPOINT\s+ERROR$`).MatchString(out) ||
			!regexp.MustCompile(`(?m)^0/\S+\s+b1\s+wf-7\s+0\s+billing\s+gone: HTTP 410$`).MatchString(out) {
			t.Errorf("dry run of an owned dead letter lacks its owner:\n%s", out)
		}
		if out := c.ok("redrive", "--endpoint", "ledger", "--dry-run").stdout; strings.Contains(out, "OWNER") ||
			!regexp.MustCompile(`(?m)^0/\S+\s+l1\s+ledger\s+gone: HTTP 410$`).MatchString(out) {
			t.Errorf("dry run without owners:\n%s", out)
		}
		if out := c.ok("redrive", "--endpoint", "billing").stdout; !strings.Contains(out, "b1") || !strings.Contains(out, "1 redriven") {
			t.Errorf("redrive:\n%s", out)
		}
		if got := deadOf(); len(got) != 1 || got[0] != "l1" {
			t.Errorf("dead letters after redriving billing's: %v, want [l1]", got)
		}
		// The requeued fire is the group's again.
		ds, err = c.q.Lease(ctx, "timerq-deliver", "d", o)
		if err != nil || len(ds) != 1 || ds[0].ID != "b1" || ds[0].Endpoint != "billing" {
			t.Errorf("lease after the redrive: %+v %v", ds, err)
		}
		for _, args := range [][]string{{"redrive"}, {"redrive", "--all", "--endpoint", "x"}, {"redrive", "0/1-0", "--all"}, {"redrive", "x"}} {
			if r := c.run(args...); r.code != ctl.ExitUsage {
				t.Errorf("%q: exit %d %s, want a usage error", args, r.code, r.stderr)
			}
		}
		if r := c.run("redrive", "0/1-0"); r.code != ctl.ExitNotFound || !strings.Contains(r.stderr, "no dead letter") {
			t.Errorf("an unknown dead letter: exit %d %s", r.code, r.stderr)
		}
	})
}

// TestDashboardRedriveCommandsRun: the timerctl commands that a read-only
// dashboard prints beside dead-lettered deliveries (one row's, then the
// endpoint's) redrive them when run as printed.
func TestDashboardRedriveCommandsRun(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		c := newCLI(t, b)
		ctx := context.Background()
		if _, err := c.q.Endpoints().Put(ctx, queue.Endpoint{Name: "billing", URL: "https://example.com/billing",
			Secrets: []queue.Secret{queue.Secret(deliver.GenerateSecret())}}, nil); err != nil {
			t.Fatal(err)
		}
		past := time.Now().Add(-time.Second)
		if _, err := c.q.ScheduleBatch(ctx, []queue.NewTimer{{ID: "b1", Due: past, Endpoint: "billing"}, {ID: "b2", Due: past, Endpoint: "billing"}}); err != nil {
			t.Fatal(err)
		}
		if res, err := c.q.Engine().Claim(ctx, 10); err != nil || len(res.Fired) != 2 {
			t.Fatalf("claim: %+v %v", res, err)
		}
		o := queue.LeaseOptions{Lease: time.Minute, MaxAttempts: 10, Count: 10}
		ds, err := c.q.Lease(ctx, dispatch.DefaultGroup, "d", o)
		if err != nil || len(ds) != 2 {
			t.Fatalf("lease: %v %v", ds, err)
		}
		for _, d := range ds {
			if _, err := c.q.Release(ctx, dispatch.DefaultGroup, d.DeliveryID, queue.ReleaseOptions{DeadLetter: true, Error: "HTTP 500"}, o); err != nil {
				t.Fatal(err)
			}
		}
		h, err := ui.New(c.q, ui.Options{})
		if err != nil {
			t.Fatal(err)
		}
		_, body := uitest.Serve(t, h, "").Get(t, "/deliveries?endpoint=billing")
		for i, pattern := range []string{`<code class="redrive-cmd">([^<]+)</code>`, `Redrive every one to billing with <code>([^<]+)</code>`} {
			m := regexp.MustCompile(pattern).FindStringSubmatch(body)
			if m == nil {
				t.Fatalf("no %s in the page:\n%s", pattern, body)
			}
			args := strings.Fields(html.UnescapeString(m[1]))
			if len(args) < 4 || args[0] != "timerctl" || args[1] != "-n" || args[2] != c.ns {
				t.Fatalf("the page's command %q is not timerctl -n %s …", m[1], c.ns)
			}
			c.ok(args[3:]...) // c.run passes --namespace itself
			if n, err := c.q.Deliveries().DeadLetterCount(ctx); err != nil || n != int64(1-i) {
				t.Errorf("%d dead letters after %q, want %d (%v)", n, m[1], 1-i, err)
			}
		}
	})
}
