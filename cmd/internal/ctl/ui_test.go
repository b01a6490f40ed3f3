package ctl_test

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/timerq/timerq/cmd/internal/ctl"
	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/queue"
)

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// TestUIRefusesTheNetworkWithoutAuth: a non-loopback address needs a
// credential, and the refusal says which ones.
func TestUIRefusesTheNetworkWithoutAuth(t *testing.T) {
	t.Setenv("TIMERQ_UI_TOKEN", "")
	t.Setenv("TIMERQ_UI_BASIC_AUTH", "")
	for _, tc := range []struct {
		listen, env, want string
	}{
		{"0.0.0.0:0", "", "refusing to serve the dashboard on 0.0.0.0:0 without auth"},
		{":0", "", "without auth"},
		{"example.internal:8080", "", "without auth"},
		{"0.0.0.0:0", "short", "too short"},
		{"nohostport", "", "is not host:port"},
	} {
		t.Setenv("TIMERQ_UI_TOKEN", tc.env)
		var out, errOut bytes.Buffer
		code := ctl.Run(context.Background(), []string{"timerctl", "--redis", "redis://127.0.0.1:1/0", "ui", "--listen", tc.listen},
			ctl.Options{Stdout: &out, Stderr: &errOut})
		if code != ctl.ExitUsage || !strings.Contains(errOut.String(), tc.want) {
			t.Errorf("ui --listen %s (token %q): exit %d, stderr %q; want exit 2 saying %q", tc.listen, tc.env, code, errOut.String(), tc.want)
		}
		if tc.env == "" && tc.listen != "nohostport" && !strings.Contains(errOut.String(), "TIMERQ_UI_TOKEN") {
			t.Errorf("refusal does not say how to fix it: %q", errOut.String())
		}
	}
}

// uiServer runs `timerctl ui` until the test ends.
func uiServer(t *testing.T, redisURL, ns string, args ...string) (base string, stderr *redistest.SyncBuffer) {
	t.Helper()
	return uiServerWith(t, ctl.Options{}, redisURL, ns, args...)
}

// uiServerWith runs `timerctl ui` with o (its Stdout and Stderr set here)
// until the test ends.
func uiServerWith(t *testing.T, o ctl.Options, redisURL, ns string, args ...string) (base string, stderr *redistest.SyncBuffer) {
	t.Helper()
	addr := freeAddr(t)
	stderr = &redistest.SyncBuffer{}
	o.Stdout, o.Stderr = io.Discard, stderr
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	full := append([]string{"timerctl", "--redis", redisURL, "--namespace", ns, "ui", "--listen", addr}, args...)
	go func() { done <- ctl.Run(ctx, full, o) }()
	t.Cleanup(func() {
		cancel()
		select {
		case code := <-done:
			if code != 0 {
				t.Errorf("timerctl ui exited %d after Ctrl-C: %s", code, stderr)
			}
		case <-time.After(5 * time.Second):
			t.Error("timerctl ui did not stop within 5s of Ctrl-C")
		}
	})
	redistest.Eventually(t, 5*time.Second, "timerctl ui to listen on "+addr, func() bool {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return true
		}
		select {
		case code := <-done:
			t.Fatalf("timerctl ui exited %d: %s", code, stderr)
		default:
		}
		return false
	})
	return "http://" + addr, stderr
}

func httpGet(t *testing.T, url string, set func(*http.Request)) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	if set != nil {
		set(req)
	}
	c := &http.Client{Timeout: 5 * time.Second}
	defer c.CloseIdleConnections()
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestUIAuthReadOnlyAndNoPassword: with a token the dashboard answers only
// to it (as a bearer or as a browser's basic-auth password); --read-only
// shows no actions; the Redis password appears nowhere, not in a page and
// not in the start-up line.
func TestUIAuthReadOnlyAndNoPassword(t *testing.T) {
	const pw = "redis-pass-Zq81x"
	// redistest pings without a password, so set it once the server runs.
	srv := redistest.Start(t, redistest.Config{})
	if err := srv.Client(t).ConfigSet(context.Background(), "requirepass", pw).Err(); err != nil {
		t.Fatal(err)
	}
	redisURL := "redis://:" + pw + "@" + srv.Addr() + "/0"
	ns := redistest.Namespace(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), Password: pw})
	defer rdb.Close()
	q, err := queue.New(rdb, queue.Options{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	if _, err := q.Schedule(context.Background(), "t-1", time.Now().Add(time.Hour), []byte("hello")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := q.Recurring().Put(context.Background(), queue.Recurring{ID: "sched-1", Every: time.Hour, Payload: []byte("tick")}); err != nil {
		t.Fatal(err)
	}
	const token = "0123456789abcdef-token"
	t.Setenv("TIMERQ_UI_TOKEN", token)
	t.Setenv("TIMERQ_UI_BASIC_AUTH", "")
	base, stderr := uiServer(t, redisURL, ns, "--read-only")

	if code, _ := httpGet(t, base+"/", nil); code != http.StatusUnauthorized {
		t.Errorf("no credentials: %d, want 401", code)
	}
	if code, _ := httpGet(t, base+"/", func(r *http.Request) { r.Header.Set("Authorization", "Bearer wrong-token-0000000") }); code != http.StatusUnauthorized {
		t.Errorf("wrong token: %d, want 401", code)
	}
	if code, _ := httpGet(t, base+"/", func(r *http.Request) { r.SetBasicAuth("admin", "nope") }); code != http.StatusUnauthorized {
		t.Errorf("wrong basic password: %d, want 401", code)
	}
	var pages []string
	for _, p := range []string{"/", "/timers", "/timer?id=t-1", "/groups", "/tail", "/timer?id=missing", "/schedules", "/schedule?id=sched-1"} {
		code, body := httpGet(t, base+p, func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+token) })
		if code != 200 && !(p == "/timer?id=missing" && code == 404) {
			t.Errorf("GET %s with the token: %d\n%s", p, code, body)
		}
		pages = append(pages, body)
	}
	code, body := httpGet(t, base+"/timer?id=t-1", func(r *http.Request) { r.SetBasicAuth("anyone", token) })
	if code != 200 || !strings.Contains(body, "hello") {
		t.Errorf("token as basic-auth password: %d", code)
	}
	if strings.Contains(body, "action-cancel") {
		t.Error("--read-only page offers cancel")
	}
	if code, body := httpGet(t, base+"/schedule?id=sched-1", func(r *http.Request) { r.SetBasicAuth("anyone", token) }); code != 200 ||
		!strings.Contains(body, "tick") || strings.Contains(body, "action-pause") {
		t.Errorf("--read-only schedule page: %d, or it offers pause:\n%s", code, body)
	}
	for i, p := range append(pages, stderr.String()) {
		if strings.Contains(p, pw) {
			t.Errorf("page or log %d shows the Redis password", i)
		}
	}
	if !strings.Contains(stderr.String(), "read-only, auth: bearer token") {
		t.Errorf("start-up line: %q", stderr)
	}
}

// TestUILoopbackRefusesOtherHostNames: without auth, a request naming
// another host (DNS rebinding) is refused; loopback names work.
func TestUILoopbackRefusesOtherHostNames(t *testing.T) {
	t.Setenv("TIMERQ_UI_TOKEN", "")
	t.Setenv("TIMERQ_UI_BASIC_AUTH", "")
	m, _ := redistest.Mini(t)
	base, _ := uiServer(t, "redis://"+m.Addr()+"/0", "default")
	if code, _ := httpGet(t, base+"/", nil); code != 200 {
		t.Errorf("loopback: %d, want 200", code)
	}
	if code, _ := httpGet(t, base+"/", func(r *http.Request) { r.Host = "localhost:8080" }); code != 200 {
		t.Errorf("localhost: %d, want 200", code)
	}
	if code, body := httpGet(t, base+"/", func(r *http.Request) { r.Host = "rebind.attacker.example:8080" }); code != http.StatusMisdirectedRequest || !strings.Contains(body, "loopback") {
		t.Errorf("foreign Host: %d, want 421 saying why:\n%.200s", code, body)
	}
}

// TestUIDeliverGroup: --deliver-group names the group whose dead letters
// the dashboard lists and whose redrive commands it prints; a bad name is
// a usage error before Redis is dialled.
func TestUIDeliverGroup(t *testing.T) {
	t.Setenv("TIMERQ_UI_TOKEN", "")
	t.Setenv("TIMERQ_UI_BASIC_AUTH", "")
	var out, errOut bytes.Buffer
	code := ctl.Run(context.Background(), []string{"timerctl", "--redis", "redis://127.0.0.1:1/0", "ui", "--deliver-group", "a b"},
		ctl.Options{Stdout: &out, Stderr: &errOut})
	if code != ctl.ExitUsage || !strings.Contains(errOut.String(), "--deliver-group") || strings.Contains(errOut.String(), "invalid options") {
		t.Errorf("ui --deliver-group 'a b': exit %d, stderr %q; want exit 2 naming the flag", code, errOut.String())
	}
	srv := redistest.Start(t, redistest.Config{})
	ns := redistest.Namespace(t)
	base, _ := uiServer(t, "redis://"+srv.Addr()+"/0", ns, "--read-only", "--deliver-group", "billing-dispatch")
	want := "timerctl -n " + ns + " redrive --all --group billing-dispatch"
	if code, body := httpGet(t, base+"/deliveries", nil); code != 200 || !strings.Contains(body, want) {
		t.Errorf("GET /deliveries = %d, without %q:\n%s", code, want, body)
	}
	if code, body := httpGet(t, base+"/endpoints", nil); code != 200 || !strings.Contains(body, "<code>billing-dispatch</code>") {
		t.Errorf("GET /endpoints = %d, not naming the group:\n%s", code, body)
	}
}
