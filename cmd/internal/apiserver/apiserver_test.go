package apiserver_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"

	"github.com/timerq/timerq/api"
	"github.com/timerq/timerq/api/apitoken"
	"github.com/timerq/timerq/cmd/internal/apiserver"
	"github.com/timerq/timerq/cmd/internal/cliconf"
	"github.com/timerq/timerq/internal/redistest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(redistest.Shared(m),
		// The test clients' keep-alive connections end asynchronously
		// after CloseIdleConnections.
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
	)
}

// fakeAPI stands in for package api: a ServeMux with routes of the API's
// shapes, each asking apiserver.Authorize for its right as package api's
// routes do, then answering 200 with the pattern it matched.
func fakeAPI() *http.ServeMux {
	mux := http.NewServeMux()
	ok := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]string{"pattern": r.Pattern, "ns": r.PathValue("ns")})
	}
	for p, right := range map[string]api.Right{
		"GET /v1/openapi.json":                api.RightPublic,
		"GET /v1/namespaces/{ns}/timers/{id}": api.RightRead,
		"POST /v1/namespaces/{ns}/timers":     api.RightWrite,
		"PUT /v1/namespaces/{ns}":             api.RightAdmin,
		"GET /v1/namespaces":                  api.RightRead,
	} {
		mux.HandleFunc(p, func(w http.ResponseWriter, r *http.Request) {
			need := api.Need{Right: right, Namespace: r.PathValue("ns")}
			if right == api.RightPublic {
				need.Namespace = ""
			} else if need.Namespace == "" {
				need.Namespace = api.AllNamespaces
			}
			if apiserver.Authorize(w, r, need) {
				ok(w, r)
			}
		})
	}
	return mux
}

// tokens mints one token per spec ("name namespaces=… rights=… [rps=…]"),
// writes their lines to a tokens file and returns it with the tokens by
// name.
func tokens(t testing.TB, specs ...string) (file string, byName map[string]string) {
	t.Helper()
	file = filepath.Join(t.TempDir(), "tokens")
	byName = writeTokens(t, file, specs...)
	return file, byName
}

func writeTokens(t testing.TB, file string, specs ...string) map[string]string {
	t.Helper()
	byName := map[string]string{}
	var lines []string
	for _, spec := range specs {
		f := strings.Fields(spec)
		tok, tk, err := apitoken.Mint(f[0], []string{"*"}, []apitoken.Right{apitoken.Read})
		if err != nil {
			t.Fatal(err)
		}
		// Replace the minted fields with the spec's.
		line := strings.Join(append([]string{f[0], strings.Fields(tk.Line())[1]}, f[1:]...), " ")
		lines = append(lines, line)
		byName[f[0]] = tok
	}
	if err := os.WriteFile(file+".tmp", []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(file+".tmp", file); err != nil {
		t.Fatal(err)
	}
	return byName
}

// server is a running apiserver.Server.
type server struct {
	*apiserver.Server
	reg    *prometheus.Registry
	log    *redistest.SyncBuffer
	client *http.Client
}

// start listens with cfg (Addr 127.0.0.1:0 unless set) and serves h until
// the test ends, then checks that Serve returned.
func start(t *testing.T, cfg apiserver.Config, h http.Handler) *server {
	t.Helper()
	if cfg.Addr == "" {
		cfg.Addr = "127.0.0.1:0"
	}
	reg := prometheus.NewRegistry()
	cfg.Metrics = reg
	var logBuf redistest.SyncBuffer
	s, err := apiserver.Listen(cfg, h, slog.New(slog.NewTextHandler(&logBuf, nil)))
	if err != nil {
		t.Fatalf("Listen: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx) }()
	client := &http.Client{Transport: &http.Transport{}}
	t.Cleanup(func() {
		client.CloseIdleConnections()
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Serve: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("Serve did not return after its context ended")
		}
	})
	return &server{Server: s, reg: reg, log: &logBuf, client: client}
}

// do sends a request with token (none when empty) and returns the
// response and its body.
func (s *server) do(t *testing.T, method, path, token string, header ...string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, s.URL()+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := s.client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// problem decodes a problem+json body, failing unless it is one with
// status.
func problem(t *testing.T, resp *http.Response, body string, status int) api.Problem {
	t.Helper()
	if resp.StatusCode != status {
		t.Fatalf("%s %s: status %d, want %d\n%s", resp.Request.Method, resp.Request.URL.Path, resp.StatusCode, status, body)
	}
	if ct := resp.Header.Get("Content-Type"); ct != api.ProblemContentType {
		t.Fatalf("Content-Type %q, want %s", ct, api.ProblemContentType)
	}
	var p api.Problem
	dec := json.NewDecoder(strings.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		t.Fatalf("body is not a Problem: %v\n%s", err, body)
	}
	if p.Status != status || !strings.HasPrefix(p.Type, api.ProblemTypePrefix) || p.Title == "" || p.Detail == "" {
		t.Fatalf("problem %+v: want status %d, a %s type, a title and a detail", p, status, api.ProblemTypePrefix)
	}
	return p
}

// TestAuthRefusals: a missing or unknown token gets 401 with
// WWW-Authenticate, a token without the right gets 403 naming the right
// and the namespace, each as problem+json; the contract is public.
func TestAuthRefusals(t *testing.T) {
	file, tok := tokens(t,
		"reader namespaces=orders,billing-* rights=read",
		"writer namespaces=orders rights=write",
		"admin namespaces=* rights=read,admin")
	s := start(t, apiserver.Config{TokensFile: file}, fakeAPI())

	resp, body := s.do(t, "GET", "/v1/namespaces/orders/timers/t1", "")
	p := problem(t, resp, body, 401)
	if p.Type != apiserver.ProblemUnauthorized || resp.Header.Get("WWW-Authenticate") != `Bearer realm="timerq"` {
		t.Errorf("no token: %+v, WWW-Authenticate %q", p, resp.Header.Get("WWW-Authenticate"))
	}
	resp, body = s.do(t, "GET", "/v1/namespaces/orders/timers/t1", tok["reader"]+"x")
	p = problem(t, resp, body, 401)
	if !strings.Contains(resp.Header.Get("WWW-Authenticate"), `error="invalid_token"`) {
		t.Errorf("unknown token: WWW-Authenticate %q", resp.Header.Get("WWW-Authenticate"))
	}
	resp, body = s.do(t, "GET", "/v1/namespaces/orders/timers/t1", "", "Authorization", "Basic "+tok["reader"])
	problem(t, resp, body, 401)

	for _, tc := range []struct {
		method, path, token string
		status              int
		right, ns           string
	}{
		{"GET", "/v1/namespaces/orders/timers/t1", "reader", 200, "", ""},
		{"GET", "/v1/namespaces/billing-eu/timers/t1", "reader", 200, "", ""},
		{"GET", "/v1/namespaces/billing/timers/t1", "reader", 403, "read", "billing"},
		{"GET", "/v1/namespaces/shipping/timers/t1", "reader", 403, "read", "shipping"},
		{"POST", "/v1/namespaces/orders/timers", "reader", 403, "write", "orders"},
		{"POST", "/v1/namespaces/orders/timers", "writer", 200, "", ""},
		{"GET", "/v1/namespaces/orders/timers/t1", "writer", 403, "read", "orders"},
		{"PUT", "/v1/namespaces/orders", "writer", 403, "admin", "orders"},
		{"PUT", "/v1/namespaces/orders", "admin", 200, "", ""},
		{"GET", "/v1/namespaces", "reader", 403, "read", "*"},
		{"GET", "/v1/namespaces", "admin", 200, "", ""},
		{"GET", "/v1/openapi.json", "", 200, "", ""},
	} {
		resp, body := s.do(t, tc.method, tc.path, tok[tc.token])
		if tc.status == 200 {
			if resp.StatusCode != 200 || !strings.Contains(body, `"pattern"`) {
				t.Errorf("%s %s with %s: %d %s, want the handler's 200", tc.method, tc.path, tc.token, resp.StatusCode, body)
			}
			continue
		}
		p := problem(t, resp, body, tc.status)
		if p.Type != apiserver.ProblemForbidden || p.Right != tc.right || p.Namespace != tc.ns ||
			!strings.Contains(p.Detail, "token "+tc.token) || !strings.Contains(p.Detail, tc.right+" right") {
			t.Errorf("%s %s with %s: %+v, want 403 naming token %s, right %s and namespace %q", tc.method, tc.path, tc.token, p, tc.token, tc.right, tc.ns)
		}
	}
}

// TestRateLimitPerToken: each token has its own bucket of one second's
// worth of requests; an empty one answers 429 with Retry-After, and it
// refills with time. A token's rps= overrides the server's default, and
// rps=0 lifts it.
func TestRateLimitPerToken(t *testing.T) {
	file, tok := tokens(t,
		"slow namespaces=* rights=read rps=2",
		"dflt namespaces=* rights=read",
		"free namespaces=* rights=read rps=0")
	var mu sync.Mutex
	now := time.Unix(1_800_000_000, 0)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); defer mu.Unlock(); now = now.Add(d) }
	s := start(t, apiserver.Config{TokensFile: file, RateLimit: 1, Now: clock}, fakeAPI())
	get := func(name string) (*http.Response, string) {
		return s.do(t, "GET", "/v1/namespaces/orders/timers/t1", tok[name])
	}
	for i := range 2 {
		if resp, _ := get("slow"); resp.StatusCode != 200 {
			t.Fatalf("slow request %d: %d, want 200 (burst 2)", i, resp.StatusCode)
		}
	}
	resp, body := get("slow")
	p := problem(t, resp, body, 429)
	if p.Type != apiserver.ProblemRateLimited || resp.Header.Get("Retry-After") != "1" || !strings.Contains(p.Detail, "token slow") {
		t.Errorf("over the limit: %+v, Retry-After %q", p, resp.Header.Get("Retry-After"))
	}
	if resp, _ := get("dflt"); resp.StatusCode != 200 {
		t.Errorf("another token is limited by slow's bucket: %d", resp.StatusCode)
	}
	if resp, _ := get("dflt"); resp.StatusCode != 429 {
		t.Errorf("dflt's second request: %d, want 429 (--api-rate-limit 1)", resp.StatusCode)
	}
	for i := range 20 {
		if resp, _ := get("free"); resp.StatusCode != 200 {
			t.Fatalf("rps=0 request %d: %d, want no limit", i, resp.StatusCode)
		}
	}
	advance(500 * time.Millisecond)
	if resp, _ := get("slow"); resp.StatusCode != 200 {
		t.Errorf("after half a second at 2 rps: %d, want 200", resp.StatusCode)
	}
	if resp, _ := get("slow"); resp.StatusCode != 429 {
		t.Errorf("slow again at once: %d, want 429", resp.StatusCode)
	}
}

// TestRateLimitDefaultStopsAFlood: at timerworker's default rate, a flood
// from one token is refused with 429 after one second's worth, while a
// token of another namespace keeps working (issue 35, S4).
func TestRateLimitDefaultStopsAFlood(t *testing.T) {
	file, tok := tokens(t,
		"flood namespaces=nsA rights=read,write",
		"other namespaces=nsB rights=read,write")
	now := time.Unix(1_800_000_000, 0)
	s := start(t, apiserver.Config{TokensFile: file, RateLimit: apiserver.DefaultRateLimit, Now: func() time.Time { return now }}, fakeAPI())
	var ok, refused int
	const flood = 300
	for i := range flood {
		resp, body := s.do(t, "POST", "/v1/namespaces/nsA/timers", tok["flood"])
		switch resp.StatusCode {
		case 200:
			ok++
		case 429:
			refused++
			if p := problem(t, resp, body, 429); p.Type != apiserver.ProblemRateLimited || resp.Header.Get("Retry-After") == "" {
				t.Fatalf("refusal %+v, Retry-After %q", p, resp.Header.Get("Retry-After"))
			}
		default:
			t.Fatalf("flood: %d %s", resp.StatusCode, body)
		}
		// One request of the other token to three of the flood's: within
		// its own bucket, all served.
		if i%3 == 0 {
			if resp, body := s.do(t, "POST", "/v1/namespaces/nsB/timers", tok["other"]); resp.StatusCode != 200 {
				t.Fatalf("the other namespace's token, during the flood: %d %s", resp.StatusCode, body)
			}
		}
	}
	if ok != apiserver.DefaultRateLimit || refused != flood-apiserver.DefaultRateLimit {
		t.Fatalf("the flood: %d served, %d refused; want %d served (one second's worth at the default rate), the rest refused",
			ok, refused, apiserver.DefaultRateLimit)
	}
}

// TestReload: Reload applies an edited tokens file (a new token works, a
// removed one is refused), and a broken file keeps the previous tokens,
// saying why in the log and in timerq_api_tokens_last_reload_successful.
func TestReload(t *testing.T) {
	file, tok := tokens(t, "old namespaces=* rights=read")
	s := start(t, apiserver.Config{TokensFile: file}, fakeAPI())
	const path = "/v1/namespaces/orders/timers/t1"
	if resp, _ := s.do(t, "GET", path, tok["old"]); resp.StatusCode != 200 {
		t.Fatalf("before reload: %d", resp.StatusCode)
	}
	tok2 := writeTokens(t, file, "new namespaces=* rights=read")
	if resp, _ := s.do(t, "GET", path, tok2["new"]); resp.StatusCode != 401 {
		t.Fatalf("a token added to the file works before Reload: %d", resp.StatusCode)
	}
	if err := s.Reload(); err != nil {
		t.Fatalf("Reload: %v", err)
	}
	if resp, _ := s.do(t, "GET", path, tok2["new"]); resp.StatusCode != 200 {
		t.Errorf("new token after reload: %d, want 200", resp.StatusCode)
	}
	if resp, _ := s.do(t, "GET", path, tok["old"]); resp.StatusCode != 401 {
		t.Errorf("removed token after reload: %d, want 401", resp.StatusCode)
	}
	if g := gauge(t, s.reg, "timerq_api_tokens_last_reload_successful"); g != 1 {
		t.Errorf("last_reload_successful = %v after a good reload", g)
	}

	if err := os.WriteFile(file, []byte("new sha256:nothex namespaces=* rights=read\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	err := s.Reload()
	var e *apitoken.Error
	if !errors.As(err, &e) || e.Line != 1 {
		t.Fatalf("Reload of a broken file = %v, want its line", err)
	}
	if resp, _ := s.do(t, "GET", path, tok2["new"]); resp.StatusCode != 200 {
		t.Errorf("after a failed reload the previous tokens stopped working: %d", resp.StatusCode)
	}
	if !strings.Contains(s.log.String(), "still serving the previous tokens") || !strings.Contains(s.log.String(), "line 1") {
		t.Errorf("the failed reload is not logged with its cause:\n%s", s.log)
	}
	if g := gauge(t, s.reg, "timerq_api_tokens_last_reload_successful"); g != 0 {
		t.Errorf("last_reload_successful = %v after a failed reload", g)
	}
}

func gauge(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

// TestRefusesTheNetworkWithoutTokens: beyond loopback the server needs a
// tokens file, as the dashboard needs auth (one check, cliconf.IsLoopback);
// on loopback without tokens it answers loopback host names only.
func TestRefusesTheNetworkWithoutTokens(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", ":0", "[::]:0", "example.internal:8080"} {
		_, err := apiserver.Listen(apiserver.Config{Addr: addr}, fakeAPI(), slog.New(slog.DiscardHandler))
		var e *cliconf.Error
		if !errors.As(err, &e) || e.ExitCode() != cliconf.ExitUsage || !strings.Contains(e.Problem, "without tokens") ||
			!strings.Contains(e.Fix, "--api-tokens-file") {
			t.Errorf("Listen(%s) without tokens = %v, want a usage error naming --api-tokens-file", addr, err)
		}
	}
	if _, err := apiserver.Listen(apiserver.Config{Addr: "nohostport"}, fakeAPI(), slog.New(slog.DiscardHandler)); err == nil ||
		!strings.Contains(err.Error(), "not host:port") {
		t.Errorf("Listen(nohostport) = %v", err)
	}
	file, _ := tokens(t, "a namespaces=* rights=read")
	s, err := apiserver.Listen(apiserver.Config{Addr: "0.0.0.0:0", TokensFile: file}, fakeAPI(), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("Listen(0.0.0.0:0) with tokens: %v", err)
	}
	s.Close()

	open := start(t, apiserver.Config{}, fakeAPI())
	if resp, body := open.do(t, "GET", "/v1/namespaces/x/timers/t1", ""); resp.StatusCode != 200 {
		t.Errorf("loopback without tokens: %d %s", resp.StatusCode, body)
	}
	req, _ := http.NewRequest("GET", open.URL()+"/v1/namespaces/x/timers/t1", nil)
	req.Host = "rebind.attacker.example:8080"
	resp, err := open.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	body := string(b)
	if p := problem(t, resp, body, http.StatusMisdirectedRequest); !strings.Contains(p.Detail, "loopback") {
		t.Errorf("foreign Host without tokens: %+v", p)
	}
}

// TestWarnsOfPlainHTTPBeyondLoopback: tokens served over plain HTTP on an
// address beyond loopback can be read on the way; Listen warns once,
// naming the TLS flags, and says nothing on loopback or with TLS.
func TestWarnsOfPlainHTTPBeyondLoopback(t *testing.T) {
	file, _ := tokens(t, "a namespaces=* rights=read")
	srv := redistest.NewPKI(t).ServerTLS(false, "127.0.0.1")
	for _, c := range []struct {
		cfg  apiserver.Config
		warn bool
	}{
		{apiserver.Config{Addr: "0.0.0.0:0", TokensFile: file}, true},
		{apiserver.Config{Addr: ":0", TokensFile: file}, true},
		{apiserver.Config{Addr: "127.0.0.1:0", TokensFile: file}, false},
		{apiserver.Config{Addr: "127.0.0.1:0"}, false},
		{apiserver.Config{Addr: "0.0.0.0:0", TokensFile: file, TLSCertFile: srv.CertFile, TLSKeyFile: srv.KeyFile}, false},
	} {
		var buf bytes.Buffer
		s, err := apiserver.Listen(c.cfg, fakeAPI(), slog.New(slog.NewTextHandler(&buf, nil)))
		if err != nil {
			t.Fatalf("Listen(%+v): %v", c.cfg, err)
		}
		s.Close()
		out := buf.String()
		n := strings.Count(out, "plain HTTP")
		switch {
		case c.warn && (n != 1 || !strings.Contains(out, "level=WARN") || !strings.Contains(out, "--api-tls-cert-file") ||
			!strings.Contains(out, "TLS-terminating proxy")):
			t.Errorf("Listen(%s, tls=%v) logged %q, want one warning naming --api-tls-cert-file and a TLS proxy", c.cfg.Addr, c.cfg.TLSCertFile != "", out)
		case !c.warn && n != 0:
			t.Errorf("Listen(%s, tls=%v) warned: %q", c.cfg.Addr, c.cfg.TLSCertFile != "", out)
		}
	}
}

// TestTLSAndClientCertificates: with a certificate the server speaks TLS
// only; with a client CA it requires a client certificate signed by it;
// Reload serves a renewed certificate from the next connection on.
func TestTLSAndClientCertificates(t *testing.T) {
	pki := redistest.NewPKI(t)
	srv := pki.ServerTLS(true, "127.0.0.1")
	file, tok := tokens(t, "a namespaces=* rights=read")
	s := start(t, apiserver.Config{TokensFile: file, TLSCertFile: srv.CertFile, TLSKeyFile: srv.KeyFile, TLSClientCAFile: srv.CAFile}, fakeAPI())
	if !strings.HasPrefix(s.URL(), "https://") {
		t.Fatalf("URL %s", s.URL())
	}
	get := func(cfg *tls.Config) (*http.Response, error) {
		tr := &http.Transport{TLSClientConfig: cfg, ForceAttemptHTTP2: true}
		defer tr.CloseIdleConnections()
		req, _ := http.NewRequest("GET", s.URL()+"/v1/namespaces/x/timers/t1", nil)
		req.Header.Set("Authorization", "Bearer "+tok["a"])
		resp, err := (&http.Client{Transport: tr}).Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		return resp, err
	}
	withCert := srv.ClientConfig(t)
	resp, err := get(withCert)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("mutual TLS with a client certificate: %v %v", resp, err)
	}
	if resp.ProtoMajor != 2 {
		t.Errorf("TLS served %s, want HTTP/2", resp.Proto)
	}
	noCert := withCert.Clone()
	noCert.Certificates = nil
	if _, err := get(noCert); err == nil {
		t.Error("a client without a certificate was served")
	}
	other := redistest.NewPKI(t).ServerTLS(false, "127.0.0.1")
	foreign := withCert.Clone()
	foreign.Certificates = other.ClientConfig(t).Certificates
	if _, err := get(foreign); err == nil {
		t.Error("a client certificate of another CA was accepted")
	}
	plain, err := http.Get("http://" + s.Addr().String() + "/v1/openapi.json")
	if err == nil {
		plain.Body.Close()
		if plain.StatusCode == 200 {
			t.Error("plain HTTP was served on the TLS listener")
		}
	}

	// Renew: a new certificate at the same paths, then Reload.
	serial := func() string {
		conn, err := tls.Dial("tcp", s.Addr().String(), withCert)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0].SerialNumber.String()
	}
	before := serial()
	cert, key := pki.Issue("renewed", "127.0.0.1")
	for src, dst := range map[string]string{cert: srv.CertFile, key: srv.KeyFile} {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if serial() != before {
		t.Fatal("the renewed certificate was served before Reload")
	}
	if err := s.Reload(); err != nil {
		t.Fatal(err)
	}
	if after := serial(); after == before {
		t.Errorf("after Reload the server still presents certificate %s", before)
	}
}

// TestTLSFlagErrors: half a key pair, a client CA without TLS, and files
// that do not load are usage errors naming the flag.
func TestTLSFlagErrors(t *testing.T) {
	pki := redistest.NewPKI(t)
	cert, key := pki.Issue("s", "127.0.0.1")
	bad := filepath.Join(t.TempDir(), "bad.pem")
	if err := os.WriteFile(bad, []byte("not pem"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		cfg  apiserver.Config
		want string
	}{
		{apiserver.Config{TLSCertFile: cert}, "--api-tls-cert-file is set without --api-tls-key-file"},
		{apiserver.Config{TLSKeyFile: key}, "--api-tls-key-file is set without --api-tls-cert-file"},
		{apiserver.Config{TLSClientCAFile: pki.CAFile}, "--api-tls-client-ca-file is set without"},
		{apiserver.Config{TLSCertFile: cert, TLSKeyFile: bad}, "--api-tls-cert-file"},
		{apiserver.Config{TLSCertFile: cert, TLSKeyFile: key, TLSClientCAFile: bad}, "holds no PEM certificate"},
		{apiserver.Config{TokensFile: bad}, "--api-tokens-file"},
		{apiserver.Config{RateLimit: -1}, "--api-rate-limit -1 is negative"},
	} {
		tc.cfg.Addr = "127.0.0.1:0"
		_, err := apiserver.Listen(tc.cfg, fakeAPI(), slog.New(slog.DiscardHandler))
		var e *cliconf.Error
		if !errors.As(err, &e) || e.ExitCode() != cliconf.ExitUsage || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Listen(%+v) = %v, want a usage error saying %q", tc.cfg, err, tc.want)
		}
	}
}

// TestServeStopsHeldRequests: Serve returns once its context ends, cutting
// a request held open (an event stream) after Limits.Shutdown, and only
// after its handler returned.
func TestServeStopsHeldRequests(t *testing.T) {
	held, returned := make(chan struct{}), make(chan struct{})
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/namespaces/{ns}/events", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(200)
		http.NewResponseController(w).Flush()
		close(held)
		<-r.Context().Done()
		close(returned)
	})
	lim := apiserver.DefaultLimits()
	lim.Shutdown = 50 * time.Millisecond
	s, err := apiserver.Listen(apiserver.Config{Addr: "127.0.0.1:0", Limits: lim}, mux, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx) }()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Get(s.URL() + "/v1/namespaces/x/events")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	<-held
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Serve: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return with a request held open")
	}
	select {
	case <-returned:
	default:
		t.Fatal("Serve returned before the held request's handler")
	}
	if _, err := io.ReadAll(resp.Body); err == nil {
		// A cut connection ends the body with an error (unexpected EOF).
		t.Error("the held request ended cleanly; want it cut")
	}
}

// TestStreamsReachTheConnection: the handler behind the server can move
// its write deadline and flush (http.ResponseController), which a long
// poll and an event stream need to outlive Limits.Write.
func TestStreamsReachTheConnection(t *testing.T) {
	errs := make(chan error, 2)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/namespaces/{ns}/events", func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		errs <- rc.SetWriteDeadline(time.Now().Add(time.Minute))
		_, _ = w.Write([]byte("data: x\n\n"))
		errs <- rc.Flush()
	})
	s := start(t, apiserver.Config{}, mux)
	if resp, _ := s.do(t, "GET", "/v1/namespaces/x/events", ""); resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Errorf("through the server's ResponseWriter: %v", err)
		}
	}
}

// TestRefusalsGoWritesBeforeTimerq pins down the three refusals that are
// plain text, not problems (docs/api.md, "Errors"): Go's HTTP/1 server
// writes them itself while reading the request, before any handler, so
// neither the server's ServeHTTP nor the API sees them; and the requests
// just short of each do reach timerq and get a problem.
func TestRefusalsGoWritesBeforeTimerq(t *testing.T) {
	file, _ := tokens(t, "a namespaces=* rights=read")
	var calls atomic.Int64
	// The handler asks Authorize for its route's right, as package api's
	// do (fakeAPI): a request without a token that reaches timerq gets its
	// 401 from there, not from the server in front.
	mux := fakeAPI()
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		mux.ServeHTTP(w, r)
	})
	s := start(t, apiserver.Config{TokensFile: file}, h)
	// Go reads at most MaxHeaderBytes plus 4096 bytes of request line and
	// headers (http.Server.initialReadLimitSize).
	limit := apiserver.DefaultLimits().MaxHeaderBytes + 4096
	for _, c := range []struct {
		name, req string
		goWrites  bool
		status    int
	}{
		{"path over the header cap", "GET /v1/namespaces/x/timers/" + strings.Repeat("a", limit) + " HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", true, 431},
		{"bad % escape in the path", "GET /v1/namespaces/x/timers/a%zz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", true, 400},
		{"NUL in a header value", "GET /v1/namespaces/x/timers/a HTTP/1.1\r\nHost: 127.0.0.1\r\nX-A: a\x00b\r\n\r\n", true, 400},
		{"a long path within the cap", "GET /v1/namespaces/x/timers/" + strings.Repeat("a", 30<<10) + " HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", false, 401},
		{"an escaped NUL in the path", "GET /v1/namespaces/x/timers/a%00b HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", false, 401},
	} {
		before := calls.Load()
		conn, err := net.Dial("tcp", s.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Write([]byte(c.req)); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		b, _ := io.ReadAll(resp.Body)
		conn.Close()
		ct := resp.Header.Get("Content-Type")
		switch {
		case resp.StatusCode != c.status:
			t.Errorf("%s: %d %s %s, want %d", c.name, resp.StatusCode, ct, b, c.status)
		case c.goWrites && (!strings.HasPrefix(ct, "text/plain") || calls.Load() != before):
			t.Errorf("%s: %d %s %s, handler calls %d: Go's server no longer writes it, so timerq could make it a problem: update docs/api.md",
				c.name, resp.StatusCode, ct, b, calls.Load()-before)
		case !c.goWrites && ct != api.ProblemContentType:
			t.Errorf("%s reached timerq but got %s %s", c.name, ct, b)
		}
	}
}
