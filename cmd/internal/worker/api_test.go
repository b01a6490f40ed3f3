package worker

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/timerq/timerq/api"
	"github.com/timerq/timerq/api/apitoken"
	"github.com/timerq/timerq/cmd/internal/apiserver"
	"github.com/timerq/timerq/cmd/internal/cliconf"
	"github.com/timerq/timerq/internal/keyspace"
	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/queue"
)

// fakeAPI stands in for package api: it asks the server for the read
// right, as package api's routes do, answers 200 with the pattern it
// matched, and records the environment the worker gave it.
func fakeAPI(got chan<- APIEnv) func(APIEnv) (http.Handler, error) {
	return func(env APIEnv) (http.Handler, error) {
		if got != nil {
			got <- env
		}
		mux := http.NewServeMux()
		mux.HandleFunc("GET /v1/namespaces/{ns}/timers/{id}", func(w http.ResponseWriter, r *http.Request) {
			if apiserver.Authorize(w, r, api.Need{Right: api.RightRead, Namespace: r.PathValue("ns")}) {
				_, _ = io.WriteString(w, r.Pattern)
			}
		})
		return mux, nil
	}
}

// running is a worker.Run in the background.
type running struct {
	url    string
	cancel context.CancelFunc
	done   chan error
	log    *redistest.SyncBuffer
	once   sync.Once
}

// runWorker runs cfg until stop (or the test's end) and waits for its API
// to listen.
func runWorker(t *testing.T, cfg Config) *running {
	t.Helper()
	urls := make(chan string, 1)
	cfg.APIListening = func(u string) { urls <- u }
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{cancel: cancel, done: make(chan error, 1), log: &redistest.SyncBuffer{}}
	go func() { r.done <- Run(ctx, cfg, slog.New(slog.NewTextHandler(r.log, nil))) }()
	t.Cleanup(func() { r.stop(t) })
	select {
	case r.url = <-urls:
	case err := <-r.done:
		r.done <- err
		t.Fatalf("Run: %v\n%s", err, r.log)
	case <-time.After(30 * time.Second):
		t.Fatalf("the API did not listen\n%s", r.log)
	}
	return r
}

// stop ends the worker and checks that Run returned nil, promptly.
func (r *running) stop(t *testing.T) {
	t.Helper()
	r.once.Do(func() {
		r.cancel()
		select {
		case err := <-r.done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(15 * time.Second):
			t.Fatalf("Run did not return after its context ended\n%s", r.log)
		}
	})
}

func get(t *testing.T, url, token string) int {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func redisURL(b *redistest.Backend) string {
	if b.Mini != nil {
		return "redis://" + b.Mini.Addr() + "/0"
	}
	return b.Real.URL()
}

// TestAPIOnlyReplicaClaimsNothing: with NoClaim (--claim=false) the worker
// serves the API but runs no poller: a due timer stays scheduled and the
// namespace's wake channel has no subscriber, until a claiming worker
// starts and fires it. Both stop when their context ends.
func TestAPIOnlyReplicaClaimsNothing(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		ns := redistest.Namespace(t)
		q, err := queue.New(b.Client, queue.Options{Namespace: ns})
		if err != nil {
			t.Fatal(err)
		}
		defer q.Close()
		if _, err := q.Schedule(ctx, "due", time.Now().Add(-time.Minute), nil); err != nil {
			t.Fatal(err)
		}
		envs := make(chan APIEnv, 1)
		cfg := Config{Conn: cliconf.Conn{RedisURL: redisURL(b)}, Namespaces: []string{ns}, MaxPollInterval: 20 * time.Millisecond,
			NoClaim: true, API: apiserver.Config{Addr: "127.0.0.1:0"}, APIHandler: fakeAPI(envs)}
		w := runWorker(t, cfg)
		env := <-envs
		if env.Claiming || env.Redis == nil || len(env.Namespaces) != 1 || env.Namespaces[0] != ns || env.WriteTimeout <= 0 {
			t.Errorf("APIEnv %+v: want Claiming false, the client, the namespace and the write timeout", env)
		}
		if code := get(t, w.url+"/v1/namespaces/"+ns+"/timers/due", ""); code != 200 {
			t.Fatalf("API: %d", code)
		}
		// The absence of claims can only be watched for a while: a
		// poller claims at once on start and then every 20 ms
		// (MaxPollInterval), so 300 ms is 15 chances.
		time.Sleep(300 * time.Millisecond)
		if tm, err := q.Get(ctx, "due"); err != nil || tm.State != queue.StateScheduled {
			t.Fatalf("the API-only replica fired the due timer: %+v %v", tm, err)
		}
		subs, err := b.Client.PubSubNumSub(ctx, keyspace.Shard(ns, 0, 1).Wake()).Result()
		if err != nil || subs[keyspace.Shard(ns, 0, 1).Wake()] != 0 {
			t.Errorf("wake channel subscribers %v (%v), want none", subs, err)
		}
		if !strings.Contains(w.log.String(), "claiming nothing") {
			t.Errorf("the start-up line does not say the replica claims nothing:\n%s", w.log)
		}
		w.stop(t)

		// The same timer fires as soon as a claiming worker serves it.
		cfg.NoClaim = false
		runWorker(t, cfg)
		redistest.Eventually(t, 10*time.Second, "a claiming worker fires the timer", func() bool {
			tm, err := q.Get(ctx, "due")
			return err == nil && tm.State == queue.StateFired
		})
	})
}

// TestAPIReloadsTokensOnSIGHUP: SIGHUP to the process reloads the tokens
// file: a token added to it is accepted from then on.
func TestAPIReloadsTokensOnSIGHUP(t *testing.T) {
	m, _ := redistest.Mini(t)
	file := filepath.Join(t.TempDir(), "tokens")
	write := func(name string) string {
		tok, tk, err := apitoken.Mint(name, []string{"*"}, []apitoken.Right{apitoken.Read})
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, []byte(tk.Line()+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return tok
	}
	first := write("first")
	w := runWorker(t, Config{Conn: cliconf.Conn{RedisURL: "redis://" + m.Addr() + "/0"}, NoClaim: true,
		API: apiserver.Config{Addr: "127.0.0.1:0", TokensFile: file}, APIHandler: fakeAPI(nil)})
	path := w.url + "/v1/namespaces/default/timers/x"
	if code := get(t, path, first); code != 200 {
		t.Fatalf("first token: %d", code)
	}
	second := write("second")
	if code := get(t, path, second); code != 401 {
		t.Fatalf("second token before SIGHUP: %d, want 401", code)
	}
	// Run registered for SIGHUP before it called APIListening, so the
	// signal cannot kill the test binary.
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	redistest.Eventually(t, 10*time.Second, "SIGHUP reloads the tokens", func() bool {
		return get(t, path, second) == 200
	})
	if code := get(t, path, first); code != 401 {
		t.Errorf("a token removed from the file still works after SIGHUP: %d", code)
	}
	if !strings.Contains(w.log.String(), "API tokens reloaded") {
		t.Errorf("the reload is not logged:\n%s", w.log)
	}
}

// TestAPIFlagsNeedEachOther: --api-* flags without --api-addr, and
// --claim=false without it, are usage errors before anything connects;
// so is --api-addr in a build without the API.
func TestAPIFlagsNeedEachOther(t *testing.T) {
	conn := cliconf.Conn{RedisURL: "redis://127.0.0.1:1/0"}
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{NoClaim: true}, "--claim=false without --api-addr"},
		{Config{API: apiserver.Config{TokensFile: "t"}}, "--api-tokens-file is set but --api-addr is not"},
		{Config{API: apiserver.Config{TLSCertFile: "c"}}, "--api-tls-cert-file is set but --api-addr is not"},
		{Config{API: apiserver.Config{RateLimit: 3}}, "--api-rate-limit is set but --api-addr is not"},
		{Config{API: apiserver.Config{Addr: ":0"}, APIHandler: fakeAPI(nil)}, "without tokens"},
	} {
		tc.cfg.Conn = conn
		tc.cfg.StartupTimeout = 200 * time.Millisecond
		err := Run(context.Background(), tc.cfg, slog.New(slog.DiscardHandler))
		var e *Error
		if !errors.As(err, &e) || e.ExitCode() != cliconf.ExitUsage || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Run(%+v) = %v, want a usage error saying %q", tc.cfg.API, err, tc.want)
		}
	}
}
