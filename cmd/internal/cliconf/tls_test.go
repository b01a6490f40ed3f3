package cliconf_test

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/timerq/timerq/cmd/internal/cliconf"
	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/queue"
)

// connect builds the client both binaries would build from conn.
func connect(t *testing.T, conn cliconf.Conn) redis.UniversalClient {
	t.Helper()
	opts, err := conn.Options()
	if err != nil {
		t.Fatalf("Options: %v", err)
	}
	opts.ContextTimeoutEnabled = true
	rdb := redis.NewUniversalClient(opts)
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

// keyOperations runs schedule, claim, wait and consume on ns through rdb.
func keyOperations(t *testing.T, rdb redis.UniversalClient, ns string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	q, err := queue.New(rdb, queue.Options{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()

	// Consume: a group reading the fire stream from its start.
	got := make(chan string, 2)
	cctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		err := q.Consume(cctx, "g", "c1", func(_ context.Context, e queue.Event) error {
			got <- e.ID
			return nil
		}, queue.ConsumeOptions{Block: 100 * time.Millisecond})
		if err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("Consume: %v", err)
		}
	})
	defer func() { stop(); wg.Wait() }()

	if _, err := q.Schedule(ctx, "tls-1", time.Now().Add(-time.Second), []byte("over TLS")); err != nil {
		t.Fatalf("Schedule: %v", err)
	}
	waited := make(chan error, 1)
	go func() { waited <- q.Wait(ctx, "tls-1") }()
	if res, err := q.Engine().Claim(ctx, 10); err != nil || len(res.Fired) != 1 {
		t.Fatalf("Claim = %+v, %v; want tls-1 fired", res, err)
	}
	if err := <-waited; err != nil {
		t.Fatalf("Wait: %v", err)
	}
	select {
	case id := <-got:
		if id != "tls-1" {
			t.Fatalf("Consume got %q", id)
		}
	case <-ctx.Done():
		t.Fatal("Consume did not deliver the fire")
	}
	tm, err := q.Get(ctx, "tls-1")
	if err != nil || tm.State != queue.StateFired || string(tm.Payload) != "over TLS" {
		t.Fatalf("Get: %+v %v", tm, err)
	}
}

// firstErr returns the first command's error through conn, explained.
func firstErr(t *testing.T, conn cliconf.Conn) *cliconf.Error {
	t.Helper()
	rdb := connect(t, conn)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := rdb.Ping(ctx).Err()
	if err == nil {
		t.Fatal("PING succeeded, want a TLS refusal")
	}
	return cliconf.Explain(err, cliconf.Target{Redis: conn.Redacted()})
}

// TestTLSWithAPrivateCA: --tls-ca-file is enough to reach a TLS-only
// server whose CA no system store trusts; without it the error names the
// flag to pass.
func TestTLSWithAPrivateCA(t *testing.T) {
	pki := redistest.NewPKI(t)
	srv := redistest.Start(t, redistest.Config{TLS: pki.ServerTLS(false, "127.0.0.1")})

	keyOperations(t, connect(t, cliconf.Conn{RedisURL: srv.URL(), TLS: cliconf.TLS{CAFile: pki.CAFile}}), redistest.Namespace(t))

	e := firstErr(t, cliconf.Conn{RedisURL: srv.URL()})
	if e.ExitCode() != cliconf.ExitFailure || !strings.Contains(e.Error(), "--tls-ca-file (TIMERQ_TLS_CA_FILE)") ||
		strings.Contains(e.Error(), "check that Redis is reachable") {
		t.Fatalf("without the CA: %q (exit %d), want a hint naming --tls-ca-file", e, e.ExitCode())
	}
	// A plain client on the TLS port, and a TLS client on a plain port.
	e = firstErr(t, cliconf.Conn{RedisURL: strings.Replace(srv.URL(), "rediss://", "redis://", 1)})
	if !strings.Contains(e.Error(), "rediss://") {
		t.Errorf("plain client to a TLS port: %q, want a hint to use rediss://", e)
	}
	plain := redistest.Start(t, redistest.Config{})
	e = firstErr(t, cliconf.Conn{RedisURL: strings.Replace(plain.URL(), "redis://", "rediss://", 1), TLS: cliconf.TLS{CAFile: pki.CAFile}})
	if !strings.Contains(e.Error(), "use redis://") {
		t.Errorf("TLS client to a plain port: %q", e)
	}
	// A name the certificate does not list.
	e = firstErr(t, cliconf.Conn{RedisURL: srv.URL(), TLS: cliconf.TLS{CAFile: pki.CAFile, ServerName: "redis.example"}})
	if !strings.Contains(e.Error(), "--tls-server-name") {
		t.Errorf("wrong name: %q", e)
	}
	// --tls-server-name checks a certificate that lists a name, not the
	// address dialled.
	named := redistest.Start(t, redistest.Config{TLS: pki.ServerTLS(false, "redis.test")})
	if err := connect(t, cliconf.Conn{RedisURL: named.URL(), TLS: cliconf.TLS{CAFile: pki.CAFile, ServerName: "redis.test"}}).Ping(context.Background()).Err(); err != nil {
		t.Errorf("--tls-server-name redis.test: %v", err)
	}
	// Skipping verification works, and is announced.
	conn := cliconf.Conn{RedisURL: srv.URL(), TLS: cliconf.TLS{InsecureSkipVerify: true}}
	if err := connect(t, conn).Ping(context.Background()).Err(); err != nil {
		t.Errorf("--tls-insecure-skip-verify: %v", err)
	}
	if w := conn.Warnings(); len(w) != 1 || !strings.Contains(w[0], "INSECURE") {
		t.Errorf("warnings %q", w)
	}
}

// TestMutualTLS: a server with tls-auth-clients yes takes the client
// certificate of --tls-cert-file/--tls-key-file, and refuses a client
// without one with a hint naming those flags.
func TestMutualTLS(t *testing.T) {
	pki := redistest.NewPKI(t)
	cfg := pki.ServerTLS(true, "127.0.0.1")
	srv := redistest.Start(t, redistest.Config{TLS: cfg})

	withCert := cliconf.TLS{CAFile: pki.CAFile, CertFile: cfg.ClientCertFile, KeyFile: cfg.ClientKeyFile}
	keyOperations(t, connect(t, cliconf.Conn{RedisURL: srv.URL(), TLS: withCert}), redistest.Namespace(t))

	e := firstErr(t, cliconf.Conn{RedisURL: srv.URL(), TLS: cliconf.TLS{CAFile: pki.CAFile}})
	if !strings.Contains(e.Error(), "--tls-cert-file and --tls-key-file") {
		t.Fatalf("without a client certificate: %q, want a hint naming --tls-cert-file and --tls-key-file", e)
	}
	// A client certificate from another CA.
	other := redistest.NewPKI(t).ServerTLS(false, "127.0.0.1")
	e = firstErr(t, cliconf.Conn{RedisURL: srv.URL(), TLS: cliconf.TLS{CAFile: pki.CAFile, CertFile: other.ClientCertFile, KeyFile: other.ClientKeyFile}})
	if !strings.Contains(e.Error(), "--tls-cert-file") {
		t.Fatalf("foreign client certificate: %q", e)
	}
}

// TestTLSResetNamesTheClientCertificate: under TLS 1.3 a server with
// tls-auth-clients yes refuses a client without an acceptable certificate
// by closing the connection after the handshake, so the client may see a
// reset instead of the "certificate required" alert (TestMutualTLS sees
// either, by timing). On a rediss:// URL that reset names the certificate
// flags; on redis:// it is an unreachable Redis.
func TestTLSResetNamesTheClientCertificate(t *testing.T) {
	reset := fmt.Errorf("write: %w", &net.OpError{Op: "write", Net: "tcp", Err: os.NewSyscallError("write", syscall.ECONNRESET)})
	e := cliconf.Explain(reset, cliconf.Target{Redis: "rediss://127.0.0.1:6380/0"})
	if !strings.Contains(e.Error(), "--tls-cert-file and --tls-key-file") || strings.Contains(e.Error(), "use rediss://") {
		t.Errorf("a reset on rediss:// = %q, want a hint naming --tls-cert-file and --tls-key-file", e)
	}
	e = cliconf.Explain(reset, cliconf.Target{Redis: "redis://127.0.0.1:6379/0"})
	if strings.Contains(e.Error(), "--tls-cert-file") || !strings.Contains(e.Error(), "check that Redis is reachable") {
		t.Errorf("a reset on redis:// = %q, want the reachability hint", e)
	}
}

// TestTLSFlagErrorsAreUsageErrors: files that are missing, not PEM, or half
// a key pair exit 2 and name the flag.
func TestTLSFlagErrorsAreUsageErrors(t *testing.T) {
	pki := redistest.NewPKI(t)
	cert, _ := pki.Issue("c")
	for _, tc := range []struct {
		conn cliconf.Conn
		want string
	}{
		{cliconf.Conn{RedisURL: "rediss://127.0.0.1:1", TLS: cliconf.TLS{CAFile: "/does/not/exist"}}, `--tls-ca-file "/does/not/exist" cannot be read`},
		{cliconf.Conn{RedisURL: "rediss://127.0.0.1:1", TLS: cliconf.TLS{CAFile: "tls_test.go"}}, "holds no PEM certificate"},
		{cliconf.Conn{RedisURL: "rediss://127.0.0.1:1", TLS: cliconf.TLS{CertFile: cert}}, "--tls-cert-file is set without --tls-key-file"},
		{cliconf.Conn{RedisURL: "rediss://127.0.0.1:1", TLS: cliconf.TLS{CertFile: cert, KeyFile: pki.CAFile}}, "--tls-cert-file"},
		{cliconf.Conn{RedisURL: "redis://127.0.0.1:1", TLS: cliconf.TLS{CAFile: pki.CAFile}}, "use the rediss:// scheme"},
	} {
		_, err := tc.conn.Options()
		var e *cliconf.Error
		if !errors.As(err, &e) || e.ExitCode() != cliconf.ExitUsage || !strings.Contains(e.Error(), tc.want) {
			t.Errorf("%+v: %v, want a usage error with %q", tc.conn.TLS, err, tc.want)
		}
	}
}

// TestClusterTLSChecksEachNodeByItsOwnName: on a TLS Cluster whose nodes
// each have a certificate for their own address only, namespaces whose
// slots live on every node work; checking every node against the first
// node's name, as go-redis's URL parser sets it up, fails.
func TestClusterTLSChecksEachNodeByItsOwnName(t *testing.T) {
	pki := redistest.NewPKI(t)
	cl := redistest.StartCluster(t, 3, pki)
	conn := cliconf.Conn{RedisURL: cl.URL(), TLS: cliconf.TLS{CAFile: pki.CAFile}}
	rdb := connect(t, conn)
	cc, ok := rdb.(*redis.ClusterClient)
	if !ok {
		t.Fatalf("the URL %s gave a %T, want a ClusterClient", cl.URL(), rdb)
	}

	// One namespace on each node.
	ctx := context.Background()
	onNode := map[string]string{}
	for i := 0; len(onNode) < 3 && i < 1000; i++ {
		ns := fmt.Sprintf("ns%d", i)
		slot, err := cc.ClusterKeySlot(ctx, "timerq:{"+ns+"}:due").Result()
		if err != nil {
			t.Fatal(err)
		}
		node := cl.Nodes[int(slot)*3/16384].Addr()
		if _, seen := onNode[node]; !seen {
			onNode[node] = ns
		}
	}
	for node, ns := range onNode {
		t.Run(node, func(t *testing.T) { keyOperations(t, rdb, ns) })
	}

	// The bug this guards against: one ServerName for every node.
	opts, err := conn.Options()
	if err != nil {
		t.Fatal(err)
	}
	host := strings.Split(cl.Nodes[0].Addr(), ":")[0]
	opts.TLSConfig = &tls.Config{RootCAs: opts.TLSConfig.RootCAs, ServerName: host, MinVersion: tls.VersionTLS12}
	bad := redis.NewUniversalClient(opts)
	defer bad.Close()
	var refused error
	for _, ns := range onNode {
		q, err := queue.New(bad, queue.Options{Namespace: ns})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := q.Schedule(ctx, "x", time.Now().Add(time.Hour), nil); err != nil {
			refused = err
		}
		q.Close()
	}
	if refused == nil || !strings.Contains(refused.Error(), "certificate is valid for") {
		t.Fatalf("one ServerName for all nodes: %v, want an x509 name mismatch on some node", refused)
	}
}

// TestSentinelTLSChecksEachNodeByItsOwnName: through a TLS Sentinel on
// 127.0.0.1, the client reaches a TLS master on 127.0.0.2 whose certificate
// lists only 127.0.0.2. go-redis's own URL parser would check the master
// against the Sentinel's name.
func TestSentinelTLSChecksEachNodeByItsOwnName(t *testing.T) {
	pki := redistest.NewPKI(t)
	master := redistest.Start(t, redistest.Config{Bind: "127.0.0.2", TLS: pki.ServerTLS(false, "127.0.0.2")})
	sentinel := redistest.Start(t, redistest.Config{Sentinel: true, TLS: pki.ServerTLS(false, "127.0.0.1"),
		Args: []string{"--tls-replication", "yes"}})
	host, port, _ := strings.Cut(master.Addr(), ":")
	if err := sentinel.Client(t).Do(context.Background(), "SENTINEL", "MONITOR", "m", host, port, 1).Err(); err != nil {
		t.Fatal(err)
	}
	url := "rediss://" + sentinel.Addr() + "/0?master_name=m"
	conn := cliconf.Conn{RedisURL: url, TLS: cliconf.TLS{CAFile: pki.CAFile}}
	keyOperations(t, connect(t, conn), redistest.Namespace(t))

	// The bug this guards against: the Sentinel's name for every node.
	opts, err := conn.Options()
	if err != nil {
		t.Fatal(err)
	}
	opts.TLSConfig = &tls.Config{RootCAs: opts.TLSConfig.RootCAs, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12}
	bad := redis.NewUniversalClient(opts)
	defer bad.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := bad.Ping(ctx).Err(); err == nil || !strings.Contains(err.Error(), "certificate is valid for 127.0.0.2") {
		t.Fatalf("one ServerName for Sentinel and master: %v, want an x509 name mismatch on the master", err)
	}
}
