package ctl_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/timerq/timerq/cmd/internal/ctl"
	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/queue"
)

// TestUITailsDoNotStarveThePages: 210 live tails against a real
// redis-server, over go-redis's default pool (10 connections a CPU, far
// fewer than the tails): the first 200 are served, the rest refused with
// 503 naming --max-tails, and the pages still answer 200 while all 200 are
// open. Before, each tail held a pool
// connection in a blocking XREAD, and GET / answered 502 after 5 s.
func TestUITailsDoNotStarveThePages(t *testing.T) {
	t.Setenv("TIMERQ_UI_TOKEN", "")
	t.Setenv("TIMERQ_UI_BASIC_AUTH", "")
	srv := redistest.Start(t, redistest.Config{})
	ns := redistest.Namespace(t)
	base, _ := uiServer(t, "redis://"+srv.Addr()+"/0", ns, "--max-tails", "200", "--max-tails-per-client", "1000")

	const tails, capTotal = 210, 200
	tr := &http.Transport{MaxIdleConnsPerHost: -1}
	defer tr.CloseIdleConnections()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	type result struct {
		code int
		body string
		err  error
	}
	results := make(chan result, tails)
	for range tails {
		wg.Go(func() {
			req, _ := http.NewRequestWithContext(ctx, "GET", base+"/tail/events", nil)
			resp, err := (&http.Client{Transport: tr}).Do(req)
			if err != nil {
				results <- result{err: err}
				return
			}
			defer resp.Body.Close()
			if resp.StatusCode != 200 {
				b, _ := io.ReadAll(resp.Body)
				results <- result{code: resp.StatusCode, body: string(b)}
				return
			}
			line, err := bufio.NewReader(resp.Body).ReadString('\n')
			results <- result{code: 200, body: line, err: err}
			<-ctx.Done() // hold the tail open until the test ends
		})
	}
	served, refused := 0, 0
	for range tails {
		r := <-results
		switch {
		case r.err != nil:
			t.Fatalf("a tail failed: %v", r.err)
		case r.code == 200 && strings.HasPrefix(r.body, "retry:"):
			served++
		case r.code == 503 && strings.Contains(r.body, "over all clients") && strings.Contains(r.body, "raise --max-tails"):
			refused++
		default:
			t.Fatalf("a tail answered %d: %.300s", r.code, r.body)
		}
	}
	if served != capTotal || refused != tails-capTotal {
		t.Fatalf("%d tails served and %d refused, want %d and %d", served, refused, capTotal, tails-capTotal)
	}
	// A generous bound: the page needs a few Redis calls, and failed, before,
	// with 502 after 5 s.
	c := &http.Client{Timeout: 30 * time.Second}
	for _, p := range []string{"/", "/groups", "/timers"} {
		resp, err := c.Get(base + p)
		if err != nil {
			t.Fatalf("GET %s with %d tails open: %v", p, served, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("GET %s with %d tails open = %d:\n%.500s", p, served, resp.StatusCode, b)
		}
	}
	c.CloseIdleConnections()
}

// slowLimits are short server timeouts, for the slow-client tests.
var slowLimits = ctl.UIServerLimits{
	ReadHeader: 300 * time.Millisecond, Read: time.Second, Write: time.Second, Idle: 300 * time.Millisecond,
	MaxHeaderBytes: 4 << 10,
}

// cutOff reports whether the server closed conn (a read returns EOF or a
// reset) within a generous bound; false when the bound passed first.
func cutOff(t *testing.T, conn net.Conn) (bool, string) {
	t.Helper()
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	got, err := io.ReadAll(conn)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return false, string(got)
	}
	return true, string(got)
}

// dribble writes line every tick until stop, the connection fails, or n
// lines are written: a client that sends its request slower than the
// server's timeouts allow.
func dribble(conn net.Conn, line string, n int, stop <-chan struct{}) {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for range n {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		if _, err := io.WriteString(conn, line); err != nil {
			return
		}
	}
}

// TestUISlowClients: a client dribbling its headers (slowloris) or its
// body is cut off by the server's timeouts, an idle keep-alive connection
// is closed, and a request's headers are capped, while a live tail outlives
// the read and write timeouts: it sets its write deadline per write.
func TestUISlowClients(t *testing.T) {
	if testing.Short() {
		t.Skip("-short skips tests that wait on real time (this one: the server's read, write and idle timeouts); drop -short to run it")
	}
	t.Setenv("TIMERQ_UI_TOKEN", "")
	t.Setenv("TIMERQ_UI_BASIC_AUTH", "")
	m, rdb := redistest.Mini(t)
	limits := slowLimits
	base, _ := uiServerWith(t, ctl.Options{UIServer: &limits}, "redis://"+m.Addr()+"/0", "default")
	addr := strings.TrimPrefix(base, "http://")
	dial := func(t *testing.T) net.Conn {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		return conn
	}

	t.Run("slowloris headers", func(t *testing.T) {
		conn := dial(t)
		stop := make(chan struct{})
		var wg sync.WaitGroup
		wg.Go(func() {
			if _, err := io.WriteString(conn, "GET / HTTP/1.1\r\nHost: "+addr+"\r\n"); err == nil {
				dribble(conn, "X-Slow: a\r\n", 150, stop) // 15 s of headers, never ending
			}
		})
		defer wg.Wait()
		defer close(stop)
		if ok, got := cutOff(t, conn); !ok || strings.Contains(got, "200 OK") {
			t.Errorf("a client dribbling headers was not cut off (%v), or was served: %q", ok, got)
		}
	})

	t.Run("slow body", func(t *testing.T) {
		conn := dial(t)
		stop := make(chan struct{})
		var wg sync.WaitGroup
		wg.Go(func() {
			if _, err := io.WriteString(conn, "POST /timer/cancel HTTP/1.1\r\nHost: "+addr+
				"\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 1000\r\n\r\n"); err == nil {
				dribble(conn, "x=123456&", 150, stop) // 15 s for 1000 bytes
			}
		})
		defer wg.Wait()
		defer close(stop)
		if ok, got := cutOff(t, conn); !ok || strings.Contains(got, "303") {
			t.Errorf("a client dribbling its body was not cut off (%v), or was served: %q", ok, got)
		}
	})

	t.Run("idle keep-alive", func(t *testing.T) {
		conn := dial(t)
		if _, err := io.WriteString(conn, "GET / HTTP/1.1\r\nHost: "+addr+"\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || resp.Close {
			t.Fatalf("GET / = %d (close %v), want 200 on a kept-alive connection", resp.StatusCode, resp.Close)
		}
		if ok, got := cutOff(t, conn); !ok || got != "" {
			t.Errorf("an idle keep-alive connection was not closed (%v), or got %q", ok, got)
		}
	})

	t.Run("header cap", func(t *testing.T) {
		req, _ := http.NewRequest("GET", base+"/", nil)
		req.Header.Set("X-Big", strings.Repeat("a", 8<<10))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
			t.Errorf("8 KiB of headers over a 4 KiB cap = %d, want 431", resp.StatusCode)
		}
	})

	t.Run("tail outlives the timeouts", func(t *testing.T) {
		q, err := queue.New(rdb, queue.Options{Namespace: "default"})
		if err != nil {
			t.Fatal(err)
		}
		defer q.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, "GET", base+"/tail/events", nil)
		tr := &http.Transport{}
		defer tr.CloseIdleConnections()
		resp, err := (&http.Client{Transport: tr}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		lines := bufio.NewScanner(resp.Body)
		start := time.Now()
		// Keep-alives come every 2 s; the third is past 3 Read and Write
		// timeouts. Then a fire still arrives.
		for alive := 0; alive < 3; {
			if !lines.Scan() {
				t.Fatalf("the tail ended after %v, with read and write timeouts of %v: %v", time.Since(start), slowLimits.Write, lines.Err())
			}
			if lines.Text() == ": keep-alive" {
				alive++
			}
		}
		if _, err := q.Schedule(ctx, "late-fire", time.Now().Add(-time.Second), nil); err != nil {
			t.Fatal(err)
		}
		if res, err := q.Engine().Claim(ctx, 10); err != nil || len(res.Fired) != 1 {
			t.Fatalf("claim: %v %v", res, err)
		}
		for lines.Scan() {
			if strings.Contains(lines.Text(), `"late-fire"`) {
				return
			}
		}
		t.Fatalf("the fire did not arrive in the tail: %v", lines.Err())
	})
}

// TestUITailCapFlags: a cap below 1 is a usage error that says what to
// give.
func TestUITailCapFlags(t *testing.T) {
	for _, flag := range []string{"--max-tails", "--max-tails-per-client"} {
		var errOut bytes.Buffer
		code := ctl.Run(context.Background(), []string{"timerctl", "--redis", "redis://127.0.0.1:1/0", "ui", flag, "0"},
			ctl.Options{Stdout: io.Discard, Stderr: &errOut})
		if code != ctl.ExitUsage || !strings.Contains(errOut.String(), flag+" 0 is below 1") {
			t.Errorf("ui %s 0: exit %d, stderr %q; want a usage error naming it", flag, code, errOut.String())
		}
	}
}
