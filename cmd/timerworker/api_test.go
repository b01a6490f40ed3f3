package main

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/timerq/timerq/api"
	"github.com/timerq/timerq/api/apitoken"
	"github.com/timerq/timerq/cmd/internal/apiserver"
	"github.com/timerq/timerq/cmd/internal/worker"
	"github.com/timerq/timerq/internal/redistest"
)

// withFakeAPI points the API seam at a handler that asks the server for
// the read right, as package api's routes do, and answers 200, for the
// duration of the test.
func withFakeAPI(t *testing.T) {
	t.Helper()
	prev := newAPIHandler
	t.Cleanup(func() { newAPIHandler = prev })
	newAPIHandler = func(worker.APIEnv) (http.Handler, error) {
		mux := http.NewServeMux()
		mux.HandleFunc("GET /v1/namespaces/{ns}/timers/{id}", func(w http.ResponseWriter, r *http.Request) {
			if apiserver.Authorize(w, r, api.Need{Right: api.RightRead, Namespace: r.PathValue("ns")}) {
				_, _ = io.WriteString(w, r.PathValue("id"))
			}
		})
		return mux, nil
	}
}

var (
	apiURL      = regexp.MustCompile(`serving the HTTP API" url=(\S+)`)
	metricsAddr = regexp.MustCompile(`serving /metrics, /healthz and /readyz" addr=(\S+)`)
)

// TestWorkerAPIFlags: the --api-* flags and their TIMERQ_* variables reach
// the server (a tokens file, a rate limit, an API-only replica), and the
// worker exits 0 when its context ends.
func TestWorkerAPIFlags(t *testing.T) {
	withFakeAPI(t)
	m, _ := redistest.Mini(t)
	tok, tk, err := apitoken.Mint("ci", []string{"orders"}, []apitoken.Right{apitoken.Read})
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(file, []byte(tk.Line()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TIMERQ_CLAIM", "false")
	t.Setenv("TIMERQ_API_RATE_LIMIT", "1")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stderr redistest.SyncBuffer
	code := make(chan int, 1)
	go func() {
		code <- run(ctx, []string{"timerworker", "--redis", "redis://" + m.Addr() + "/0", "--namespace", "orders",
			"--api-addr", "127.0.0.1:0", "--api-tokens-file", file, "--metrics-addr", "127.0.0.1:0"}, io.Discard, &stderr)
	}()
	var base, metrics string
	redistest.Eventually(t, 10*time.Second, "the API to listen", func() bool {
		mm, ma := apiURL.FindStringSubmatch(stderr.String()), metricsAddr.FindStringSubmatch(stderr.String())
		if mm != nil && ma != nil {
			base, metrics = mm[1], "http://"+ma[1]
			return true
		}
		return false
	})
	var body string
	getURL := func(url, token string) int {
		req, _ := http.NewRequest("GET", url, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		tr := &http.Transport{}
		defer tr.CloseIdleConnections()
		resp, err := (&http.Client{Transport: tr}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		body = string(b)
		return resp.StatusCode
	}
	get := func(path, token string) int { return getURL(base+path, token) }
	for _, tc := range []struct {
		path, token string
		want        int
	}{
		{"/v1/namespaces/orders/timers/a", "", 401},
		{"/v1/namespaces/billing/timers/a", tok, 403},
		{"/v1/namespaces/orders/timers/a", tok, 200},
		{"/v1/namespaces/orders/timers/a", tok, 429}, // TIMERQ_API_RATE_LIMIT=1
	} {
		if got := get(tc.path, tc.token); got != tc.want {
			t.Errorf("GET %s (token %v): %d, want %d", tc.path, tc.token != "", got, tc.want)
		}
	}
	// The API's metrics are on the worker's registry; an API-only replica
	// is ready while Redis answers, having no claims to prove.
	if code := getURL(metrics+"/metrics", ""); code != 200 ||
		!strings.Contains(body, `http_server_request_duration_seconds_count{http_request_method="GET",http_response_status_code="200",http_route="/v1/namespaces/{ns}/timers/{id}"} 1`) {
		t.Errorf("/metrics: %d, no count of the one 200 under its route:\n%s", code, body)
	}
	if code := getURL(metrics+"/readyz", ""); code != 200 {
		t.Errorf("/readyz of an API-only replica: %d %s", code, body)
	}
	if !strings.Contains(stderr.String(), "claiming nothing (--claim=false)") {
		t.Errorf("TIMERQ_CLAIM=false did not make an API-only replica:\n%s", stderr.String())
	}
	cancel()
	select {
	case c := <-code:
		if c != 0 {
			t.Errorf("exit %d, want 0:\n%s", c, stderr.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the worker did not stop with its context")
	}
}

// TestWorkerAPIRateLimitDefault: without --api-rate-limit, a token whose
// line sets no rps= is limited to apiserver.DefaultRateLimit (issue 35, S4:
// a flood from one token went unrefused).
func TestWorkerAPIRateLimitDefault(t *testing.T) {
	for _, f := range flags() {
		if ff, ok := f.(*cli.Float64Flag); ok && ff.Name == apiserver.FlagRateLimit {
			if ff.Value != apiserver.DefaultRateLimit || apiserver.DefaultRateLimit <= 0 {
				t.Fatalf("--%s defaults to %v, want apiserver.DefaultRateLimit (%v), on", ff.Name, ff.Value, apiserver.DefaultRateLimit)
			}
			return
		}
	}
	t.Fatalf("no --%s flag", apiserver.FlagRateLimit)
}

// TestWorkerAPIFlagErrors: API flags that cannot work are usage errors
// (exit 2) on one line with the fix, before Redis is dialled.
func TestWorkerAPIFlagErrors(t *testing.T) {
	withFakeAPI(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--claim=false"}, "--claim=false without --api-addr would serve nothing: give --api-addr"},
		{[]string{"--api-tokens-file", "t"}, "--api-tokens-file is set but --api-addr is not"},
		{[]string{"--api-addr", ":0"}, "refusing to serve the API on :0 without tokens"},
		{[]string{"--api-addr", "0.0.0.0:0", "--api-tls-client-ca-file", "ca.pem", "--api-tokens-file", "t"}, "--api-tls-client-ca-file is set without --api-tls-cert-file"},
		{[]string{"--api-addr", "127.0.0.1:0", "--api-rate-limit", "fast"}, `--api-rate-limit "fast" is not a number`},
		{[]string{"--api-addr", "127.0.0.1:0", "--api-rate-limit", "-2"}, "--api-rate-limit -2 is negative"},
		{[]string{"--claim", "maybe"}, `unexpected argument "maybe"`},
	} {
		var stderr strings.Builder
		code := run(context.Background(), append([]string{"timerworker", "--redis", "redis://127.0.0.1:1/0"}, tc.args...), io.Discard, &stderr)
		out := strings.TrimSpace(stderr.String())
		if code != 2 || strings.Count(out, "\n") != 0 || !strings.HasPrefix(out, "timerworker: ") || !strings.Contains(out, tc.want) {
			t.Errorf("%v: exit %d %q, want 2 and one line saying %q", tc.args, code, out, tc.want)
		}
	}
}
