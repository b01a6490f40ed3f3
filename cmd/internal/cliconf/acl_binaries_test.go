package cliconf_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/cookiejar"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/timerq/timerq/cmd/internal/cliconf"
	"github.com/timerq/timerq/cmd/internal/ctl"
	"github.com/timerq/timerq/cmd/internal/worker"
	"github.com/timerq/timerq/internal/keyspace"
	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/internal/uitest"
	"github.com/timerq/timerq/queue"
)

// TestACLLinesRunTheBinaries creates a user from each of docs/security.md's
// ACL lines, verbatim but for NS and the password, and runs the binaries
// the doc names for that role, as the binaries run them (worker.Run is
// timerworker's whole logic, ctl.Run is timerctl's): timerworker passes its
// start-up check, fires a timer, takes the maintenance lock and serves its
// metrics; the read-only operator runs get, list, stats and watch; the
// dashboard roles serve every page through `timerctl ui` (with --read-only
// for the read-only one) and, with actions, perform each action; the API
// server's line serves every route of api/openapi.json through an API-only
// timerworker (--api-addr --claim=false). Nothing may be refused. TestACLRoles runs the roles through the Go API instead.
func TestACLLinesRunTheBinaries(t *testing.T) {
	lines := aclLines(t)
	// No ACL line may live outside the block the tests read.
	doc, err := os.ReadFile("../../../docs/security.md")
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(doc), "ACL SETUSER timerq-"); n != len(lines) {
		t.Fatalf("docs/security.md has %d ACL SETUSER lines, %d of them inside <!-- acl --> … <!-- end acl -->; move them all inside, where the tests run them", n, len(lines))
	}
	srv := redistest.Start(t, redistest.Config{})
	admin := srv.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	adminQ := func(ns string) *queue.Queue {
		q, err := queue.New(admin, queue.Options{Namespace: ns})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { q.Close() })
		return q
	}
	// Each role gets a namespace of its own, so that no role finds what
	// another role's binary left behind.
	ns := func(t *testing.T) string { return redistest.Namespace(t) }

	t.Run("worker", func(t *testing.T) {
		mine := ns(t)
		_, url := createUser(t, srv, admin, lines["worker"], mine)
		q := adminQ(mine)
		if _, err := q.Schedule(ctx, "w", time.Now().Add(-time.Second), []byte("p")); err != nil {
			t.Fatal(err)
		}
		metrics := freeTCPAddr(t)
		var logBuf redistest.SyncBuffer
		done, stopWorker := startWorker(t, ctx, worker.Config{
			Conn:            cliconf.Conn{RedisURL: url},
			Namespaces:      []string{mine},
			MaxPollInterval: 100 * time.Millisecond,
			MetricsAddr:     metrics,
		}, &logBuf)
		defer stopWorker()
		var scrape string
		defer func() {
			if t.Failed() {
				var ours []string
				for _, l := range strings.Split(scrape, "\n") {
					if strings.HasPrefix(l, "timerq_") {
						ours = append(ours, l)
					}
				}
				t.Logf("last /metrics scrape:\n%s\ntimerworker log:\n%s", strings.Join(ours, "\n"), logBuf.String())
			}
		}()
		running := func() {
			select {
			case err := <-done:
				done <- err
				t.Fatalf("timerworker exited under the documented worker line: %v", err)
			default:
			}
		}
		redistest.Eventually(t, 15*time.Second, "timerworker to fire w, hold the maintenance lock and scrape cleanly", func() bool {
			running()
			tm, err := q.Get(ctx, "w")
			if err != nil || tm.State != queue.StateFired {
				return false
			}
			scrape = httpBody(t, "http://"+metrics+"/metrics")
			return strings.Contains(scrape, `timerq_maintenance_holder{namespace="`+mine+`"} 1`) &&
				strings.Contains(scrape, `timerq_backlog_scrape_success{namespace="`+mine+`"} 1`) &&
				strings.Contains(scrape, `timerq_namespace_timers_fired_total{namespace="`+mine+`"} 1`)
		})
		if ready := httpBody(t, "http://"+metrics+"/readyz"); ready != "ready\n" {
			t.Errorf("/readyz = %q", ready)
		}
		// The holder extends the lock (redsync's script: GET, PEXPIRE)
		// every third of its expiry: its time to live goes up again.
		lock := keyspace.Namespace(mine).MaintLock()
		low := admin.PTTL(ctx, lock).Val()
		redistest.Eventually(t, 15*time.Second, "timerworker to extend the maintenance lock", func() bool {
			running()
			ttl := admin.PTTL(ctx, lock).Val()
			if ttl > low {
				return true
			}
			low = ttl
			return false
		})
		// On SIGTERM it releases the lock (GET, DEL).
		stopWorker()
		if n := admin.Exists(ctx, lock).Val(); n != 0 {
			t.Errorf("timerworker left its maintenance lock %s behind", lock)
		}
		if l := logBuf.String(); strings.Contains(l, "NOPERM") || strings.Contains(l, "permission") ||
			strings.Contains(l, "level=WARN") || strings.Contains(l, "level=ERROR") || !strings.Contains(l, "maintenance lock released") {
			t.Errorf("timerworker logged a refusal or a failure under the documented worker line, or did not release its lock:\n%s", l)
		}
	})

	t.Run("ops", func(t *testing.T) {
		mine := ns(t)
		_, url := createUser(t, srv, admin, lines["ops"], mine)
		q := adminQ(mine)
		for i, id := range []string{"o1", "o2", "o3"} {
			if _, err := q.Schedule(ctx, id, time.Now().Add(time.Duration(i+1)*time.Hour), []byte(id)); err != nil {
				t.Fatal(err)
			}
		}
		timerctl := func(args ...string) (int, string, string) {
			var out, errOut bytes.Buffer
			code := ctl.Run(ctx, append([]string{"timerctl", "--redis", url, "-n", mine}, args...), ctl.Options{Stdout: &out, Stderr: &errOut})
			return code, out.String(), errOut.String()
		}
		for _, args := range [][]string{{"get", "o1"}, {"list"}, {"-o", "json", "list"}, {"stats"}, {"-o", "json", "stats"},
			{"list", "--owner", "wf", "--label", "k=v"}, {"owner", "get", "wf"}} {
			if code, out, stderr := timerctl(args...); code != 0 || stderr != "" {
				t.Errorf("timerctl %s under the documented ops line: exit %d\n%s%s", strings.Join(args, " "), code, out, stderr)
			}
		}
		// list pages with a cursor (list.lua's ZRANK): ask for the page
		// after the first.
		code, _, stderr := timerctl("-o", "json", "list", "--limit", "1")
		cur, ok := strings.CutPrefix(strings.TrimSpace(stderr), "next cursor: ")
		if code != 0 || !ok {
			t.Fatalf("list --limit 1 under the documented ops line: exit %d %q, want a next cursor", code, stderr)
		}
		if code, out, stderr := timerctl("list", "--limit", "1", "--cursor", cur); code != 0 || !strings.Contains(out, "o2") {
			t.Errorf("list --cursor under the documented ops line: exit %d\n%s%s", code, out, stderr)
		}
		// watch follows a fire.
		var wout, werr redistest.SyncBuffer
		watching := make(chan struct{})
		wctx, stopWatch := context.WithCancel(ctx)
		wdone := make(chan int, 1)
		go func() {
			wdone <- ctl.Run(wctx, []string{"timerctl", "--redis", url, "-n", mine, "watch"},
				ctl.Options{Stdout: &wout, Stderr: &werr, Watching: func() { close(watching) }})
		}()
		select {
		case <-watching:
		case code := <-wdone:
			t.Fatalf("watch exited %d before following: %s", code, werr.String())
		}
		if _, err := q.Schedule(ctx, "fired-by-admin", time.Now().Add(-time.Second), nil); err != nil {
			t.Fatal(err)
		}
		if _, err := q.Engine().Claim(ctx, 10); err != nil {
			t.Fatal(err)
		}
		redistest.Eventually(t, 10*time.Second, "watch to print the fire", func() bool {
			return strings.Contains(wout.String(), "fired-by-admin")
		})
		stopWatch()
		if code := <-wdone; code != 0 || strings.Contains(werr.String(), "timerctl: ") {
			t.Errorf("watch under the documented ops line: exit %d %q", code, werr.String())
		}
	})

	t.Run("api", func(t *testing.T) {
		mine := ns(t)
		_, url := createUser(t, srv, admin, lines["api"], mine)
		q := adminQ(mine)
		apiOnlyServesEveryRoute(t, ctx, url, mine, q)
	})

	for _, role := range []string{"ui-readonly", "ui"} {
		t.Run(role, func(t *testing.T) {
			mine := ns(t)
			_, url := createUser(t, srv, admin, lines[role], mine)
			q := adminQ(mine)
			for _, id := range []string{"t1", "t2", "t3"} {
				if _, err := q.Schedule(ctx, id, time.Now().Add(time.Hour), []byte("p")); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := q.Schedule(ctx, "f", time.Now().Add(-time.Second), nil); err != nil {
				t.Fatal(err)
			}
			if _, err := q.Engine().Claim(ctx, 10); err != nil {
				t.Fatal(err)
			}
			if err := admin.XGroupCreate(ctx, q.Keys().Stream(0), "billing", "0").Err(); err != nil {
				t.Fatal(err)
			}
			deadID, err := admin.XAdd(ctx, &redis.XAddArgs{Stream: q.Keys().DeadLetter(0), Values: []any{
				"id", "f", "due", "1", "fired", "2", "payload", "", "error", "broke", "attempts", "5",
				"group", "billing", "consumer", "c1", "stream_id", "1-0"}}).Result()
			if err != nil {
				t.Fatal(err)
			}
			for _, id := range []string{"s1", "s2"} {
				if _, _, err := q.Recurring().Put(ctx, queue.Recurring{ID: id, Every: time.Hour}); err != nil {
					t.Fatal(err)
				}
			}
			var args []string
			if role == "ui-readonly" {
				args = append(args, "--read-only")
			}
			d := timerctlUI(t, url, mine, args...)
			for _, p := range []string{"/", "/timers", "/timers?prefix=t", "/timer?id=t1", "/tail", "/groups", "/schedules", "/schedule?id=s1",
				"/endpoints", "/deliveries", "/flows", "/cancel-jobs"} {
				resp, body := d.Get(t, p)
				if resp.StatusCode != 200 || strings.Contains(body, `class="problem"`) {
					t.Errorf("GET %s under the documented %s line = %d, want 200 with no problem:\n%s", p, role, resp.StatusCode, body)
				}
			}
			tailOK(t, d)
			if role == "ui-readonly" {
				return
			}
			for _, p := range []string{"/timer/confirm?id=t1&action=cancel", "/timer/confirm?id=t2&action=fire",
				"/timer/confirm?id=t3&action=reschedule&due=2031-05-06T07:08:09Z", "/schedule/confirm?id=s1&action=pause",
				"/schedule/confirm?id=s1&action=resume", "/schedule/confirm?id=s2&action=delete", "/dead/confirm?id=" + deadID,
				"/cancel-jobs/confirm?prefix=t"} {
				if resp, body := d.Act(t, p); resp.StatusCode != 303 {
					t.Errorf("%s under the documented ui line = %d, want 303:\n%s", p, resp.StatusCode, body)
				}
			}
			if tm, _ := q.Get(ctx, "t1"); tm.State != queue.StateCancelled {
				t.Errorf("t1 is %v after cancel", tm.State)
			}
			if n, _ := q.Deliveries().DeadLetterCount(ctx); n != 0 {
				t.Errorf("%d dead letters after requeueing the only one", n)
			}
		})
	}
}

// timerctlUI runs `timerctl ui` on a free loopback port until the test
// ends, and returns a client of it.
func timerctlUI(t *testing.T, redisURL, ns string, args ...string) *uitest.Client {
	t.Helper()
	t.Setenv("TIMERQ_UI_TOKEN", "")
	t.Setenv("TIMERQ_UI_BASIC_AUTH", "")
	addr := freeTCPAddr(t)
	var stderr redistest.SyncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	full := append([]string{"timerctl", "--redis", redisURL, "--namespace", ns, "ui", "--listen", addr}, args...)
	go func() { done <- ctl.Run(ctx, full, ctl.Options{Stdout: io.Discard, Stderr: &stderr}) }()
	jar, _ := cookiejar.New(nil)
	c := &uitest.Client{URL: "http://" + addr, HTTP: &http.Client{Jar: jar, Timeout: 10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	t.Cleanup(func() {
		c.HTTP.CloseIdleConnections()
		cancel()
		select {
		case code := <-done:
			if code != 0 {
				t.Errorf("timerctl ui exited %d after Ctrl-C: %s", code, stderr.String())
			}
		case <-time.After(5 * time.Second):
			t.Error("timerctl ui did not stop within 5s of Ctrl-C")
		}
	})
	redistest.Eventually(t, 5*time.Second, "timerctl ui to listen on "+addr, func() bool {
		select {
		case code := <-done:
			t.Fatalf("timerctl ui exited %d: %s", code, stderr.String())
		default:
		}
		conn, err := net.Dial("tcp", addr)
		if err == nil {
			conn.Close()
		}
		return err == nil
	})
	return c
}

// tailOK follows the dashboard's live tail briefly: a refused read would
// arrive as a "problem" event.
func tailOK(t *testing.T, c *uitest.Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", c.URL+"/tail/events?after=0", nil)
	resp, err := c.HTTP.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body) // ends with the deadline
	if resp.StatusCode != 200 || strings.Contains(string(b), "event: problem") {
		t.Errorf("live tail = %d:\n%s", resp.StatusCode, b)
	}
}

func httpBody(t *testing.T, url string) string {
	t.Helper()
	c := &http.Client{Timeout: 5 * time.Second}
	defer c.CloseIdleConnections()
	resp, err := c.Get(url)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// startWorker runs worker.Run (timerworker's whole logic) with cfg on a
// goroutine of its own, logging to log, and returns the channel its result
// arrives on and stop, which cancels it and waits up to 10 s for it to
// return, failing t if it returns an error or does not return; stop does
// nothing the second time, and is called from the test's goroutine. A caller that takes the result from done puts
// it back, for stop to find.
func startWorker(t *testing.T, ctx context.Context, cfg worker.Config, log io.Writer) (done chan error, stop func()) {
	wctx, cancel := context.WithCancel(ctx)
	done = make(chan error, 1)
	go func() { done <- worker.Run(wctx, cfg, slog.New(slog.NewTextHandler(log, nil))) }()
	stopped := false // stop runs on the test's goroutine only
	return done, func() {
		t.Helper()
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("timerworker stopped with: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("timerworker did not stop within 10s")
		}
	}
}

func freeTCPAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
