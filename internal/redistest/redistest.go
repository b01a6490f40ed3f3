// Package redistest runs the same tests against miniredis and a real,
// throwaway redis-server, which it starts on a free port and stops by pid.
//
// The real arm of ForEach runs on one redis-server shared by the test
// binary (SharedServer): every test keeps to a namespace of its own, and
// starting a server per test cost about a tenth of a second each. A test
// that kills, configures (CONFIG SET, ACL) or reads server-wide state
// (INFO, CLIENT LIST, DBSIZE, SCAN of every key) takes a server of its own:
// ForEachPrivate, ForEachAllPrivate or Start.
package redistest

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

const hint = "install it (apt-get install redis-server); TIMERQ_REQUIRE_REDIS=1 turns this skip into a failure"

// ServerEnv names the environment variable that picks the server binary the
// real-Redis tests run, e.g. TIMERQ_REDIS_SERVER=/opt/valkey/bin/valkey-server
// to run the suite against Valkey. Default: redis-server from PATH.
const ServerEnv = "TIMERQ_REDIS_SERVER"

// Require returns the path of redis-server (or of $TIMERQ_REDIS_SERVER),
// skipping the test when there is none, or failing it when
// TIMERQ_REQUIRE_REDIS=1 (as in CI). With -short it always skips: the fast
// loop (go test -short ./...) runs the miniredis arms and the tests that
// need no server, and CI never passes -short.
func Require(t testing.TB) string {
	t.Helper()
	if testing.Short() {
		t.Skip("redistest: -short runs miniredis only; drop -short to run on real Redis")
	}
	name := "redis-server"
	if v := os.Getenv(ServerEnv); v != "" {
		name = v
	}
	path, err := exec.LookPath(name)
	if err != nil {
		where := "redis-server not found on PATH"
		if name != "redis-server" {
			where = fmt.Sprintf("%s=%s: %v", ServerEnv, name, err)
		}
		if os.Getenv("TIMERQ_REQUIRE_REDIS") == "1" {
			t.Fatalf("redistest: %s; %s", where, hint)
		}
		t.Skipf("redistest: %s; %s", where, hint)
	}
	return path
}

// Config adds redis-server arguments, such as "--appendonly", "yes".
type Config struct {
	Args []string
	// Bind is the address the server listens on; default 127.0.0.1. Any
	// 127.x.y.z works on Linux, which gives each Cluster node its own name
	// for TLS (StartCluster).
	Bind string
	// TLS, when set, makes the server speak TLS only (--port 0 --tls-port).
	TLS *TLS
	// Sentinel starts a Sentinel (redis-server CONF --sentinel) with an
	// empty configuration; tell it what to monitor with SENTINEL MONITOR.
	Sentinel bool
	// ClusterBus gives the server a free Cluster bus port of its own
	// (--cluster-port), picked afresh at each start attempt, as the client
	// port is: a port picked once may be taken before the server binds it.
	ClusterBus bool
}

// TLS is a TLS-only server's certificates (PEM files; see NewPKI).
type TLS struct {
	CAFile, CertFile, KeyFile string
	// AuthClients requires a client certificate signed by CAFile
	// (tls-auth-clients yes); redistest's own clients then present
	// ClientCertFile and ClientKeyFile.
	AuthClients                   bool
	ClientCertFile, ClientKeyFile string
	// ServerName is the name redistest's own clients check the server's
	// certificate against; empty means the address they dial.
	ServerName string
}

// ClientConfig is a tls.Config that trusts CAFile and presents the client
// certificate when there is one: what redistest's own clients use.
func (c *TLS) ClientConfig(t testing.TB) *tls.Config {
	t.Helper()
	pem, err := os.ReadFile(c.CAFile)
	if err != nil {
		t.Fatalf("redistest: %v", err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	cfg := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12, ServerName: c.ServerName}
	if c.ClientCertFile != "" {
		pair, err := tls.LoadX509KeyPair(c.ClientCertFile, c.ClientKeyFile)
		if err != nil {
			t.Fatalf("redistest: %v", err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg
}

// Server is a redis-server owned by one test.
type Server struct {
	t    testing.TB
	bin  string
	args []string
	bind string
	tls  *TLS
	port int
	bus  int // the Cluster bus port, when cluster-enabled
	dir  string
	cmd  *exec.Cmd
	// exited closes when cmd has been reaped.
	exited chan struct{}
	// shared marks the binary's shared server (SharedServer): no test may
	// stop, kill or restart it.
	shared bool
}

// Start starts a redis-server on a free port with its own data directory
// and stops it by pid when the test ends.
func Start(t testing.TB, cfg Config) *Server {
	t.Helper()
	s := &Server{t: t, bin: Require(t), dir: t.TempDir(), bind: cfg.Bind, tls: cfg.TLS}
	if s.bind == "" {
		s.bind = "127.0.0.1"
	}
	var lastErr error
	for range 5 {
		s.port = freePort(t, s.bind)
		s.args = []string{"--port", fmt.Sprint(s.port)}
		if cfg.TLS != nil {
			auth := "no"
			if cfg.TLS.AuthClients {
				auth = "yes"
			}
			s.args = []string{"--port", "0", "--tls-port", fmt.Sprint(s.port),
				"--tls-cert-file", cfg.TLS.CertFile, "--tls-key-file", cfg.TLS.KeyFile,
				"--tls-ca-cert-file", cfg.TLS.CAFile, "--tls-auth-clients", auth}
		}
		s.args = append(s.args, "--bind", s.bind, "--dir", s.dir,
			"--save", "", "--appendonly", "no", "--logfile", filepath.Join(s.dir, "redis.log"))
		if !cfg.Sentinel {
			// A replica's full sync starts at once: a diskless sync (the
			// default) waits 5 s for more replicas to share the
			// transfer, which was most of the time of every test that
			// attaches a replica (issue 36). Not a diskless sync with no
			// delay: a write right after such a sync often timed out in
			// WAIT (queue's TestReplicas*, under load). cfg.Args may set
			// it again.
			s.args = append(s.args, "--repl-diskless-sync", "no")
		}
		if cfg.ClusterBus {
			s.bus = freePort(t, s.bind)
			s.args = append(s.args, "--cluster-port", fmt.Sprint(s.bus))
		}
		s.args = append(s.args, cfg.Args...)
		if cfg.Sentinel {
			conf := filepath.Join(s.dir, "sentinel.conf")
			if err := os.WriteFile(conf, nil, 0o600); err != nil {
				t.Fatalf("redistest: %v", err)
			}
			s.args = append(append([]string{conf}, s.args...), "--sentinel")
		}
		if lastErr = s.start(); lastErr == nil {
			t.Cleanup(s.stop)
			return s
		}
	}
	t.Fatalf("redistest: redis-server did not start: %v\n%s", lastErr, s.logTail())
	return nil
}

// freePort is a port free on host now. Another process may take it before
// the server binds it: Start then tries again with another.
func freePort(t testing.TB, host string) int {
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		t.Fatalf("redistest: no free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func (s *Server) start() error {
	s.cmd = exec.Command(s.bin, s.args...)
	// The server dies with the test binary even when no cleanup runs (a
	// -timeout panic, a SIGKILL). Pdeathsig follows the OS thread that
	// forks, so fork from a locked thread, which Go keeps after the unlock.
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	runtime.LockOSThread()
	err := s.cmd.Start()
	runtime.UnlockOSThread()
	if err != nil {
		return err
	}
	// One goroutine reaps the process; signal waits on it.
	s.exited = make(chan struct{})
	go func(cmd *exec.Cmd, exited chan struct{}) { _ = cmd.Wait(); close(exited) }(s.cmd, s.exited)
	c := s.newClient(&redis.Options{MaxRetries: -1})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-s.exited:
			s.cmd = nil
			return fmt.Errorf("redis-server exited")
		default:
		}
		// LOADING while replaying the AOF fails PING: not yet started.
		// And the server that answers must be this one: another process
		// may have taken the port between freePort and the bind, and then
		// answers until this one, failing to bind, exits (a Cluster test
		// once sent CLUSTER MYID to another test's plain server).
		if c.Ping(context.Background()).Err() == nil && s.answersAsItself(c) {
			return nil
		}
		// Polling with a deadline: redis-server signals readiness only
		// by answering, so there is nothing else to await.
		time.Sleep(10 * time.Millisecond)
	}
	return fmt.Errorf("no PING answer within 10s")
}

// answersAsItself reports whether the server c reaches is s's process,
// by the process_id its INFO gives.
func (s *Server) answersAsItself(c *redis.Client) bool {
	info, err := c.Info(context.Background(), "server").Result()
	if err != nil {
		return false
	}
	want := fmt.Sprintf("process_id:%d", s.cmd.Process.Pid)
	for _, line := range strings.Split(info, "\n") {
		if strings.TrimSpace(line) == want {
			return true
		}
	}
	return false
}

func (s *Server) logTail() string {
	b, _ := os.ReadFile(filepath.Join(s.dir, "redis.log"))
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > 20 {
		lines = lines[len(lines)-20:]
	}
	return strings.Join(lines, "\n")
}

// Addr is the server's host:port.
func (s *Server) Addr() string { return net.JoinHostPort(s.bind, fmt.Sprint(s.port)) }

// URL is the server's redis:// URL, or rediss:// with TLS.
func (s *Server) URL() string {
	if s.tls != nil {
		return "rediss://" + s.Addr() + "/0"
	}
	return "redis://" + s.Addr() + "/0"
}

// newClient returns a client of the server, over TLS when it speaks TLS.
func (s *Server) newClient(o *redis.Options) *redis.Client {
	o.Addr = s.Addr()
	if s.tls != nil {
		o.TLSConfig = s.tls.ClientConfig(s.t)
	}
	return redis.NewClient(o)
}

// Dir is the server's data directory.
func (s *Server) Dir() string { return s.dir }

// Client returns a client of the server, closed when the test ends.
func (s *Server) Client(t testing.TB) *redis.Client {
	c := s.newClient(&redis.Options{})
	t.Cleanup(func() { c.Close() })
	return c
}

// signal sends sig and waits up to d for the process to exit.
func (s *Server) signal(sig syscall.Signal, d time.Duration) bool {
	if s.cmd == nil || s.cmd.Process == nil {
		return true
	}
	_ = s.cmd.Process.Signal(sig)
	select {
	case <-s.exited:
		s.cmd = nil
		return true
	case <-time.After(d):
		return false
	}
}

// mustOwn stops a test from taking down the shared server the other tests
// of its binary run on.
func (s *Server) mustOwn(op string) {
	if s.shared {
		panic("redistest: " + op + " of the shared redis-server: a test that kills, restarts or configures its server needs one of its own (ForEachPrivate, ForEachAllPrivate or Start)")
	}
}

// alive reports whether the server's process runs (it may be paused).
func (s *Server) alive() bool { return s.cmd != nil && s.cmd.Process != nil }

// Pid is the server's process ID; 0 when it does not run.
func (s *Server) Pid() int {
	if !s.alive() {
		return 0
	}
	return s.cmd.Process.Pid
}

// Pause freezes the server with SIGSTOP: it keeps its sockets and answers
// nothing, as a hung host would. Continue, Stop, Restart or the end of the
// test resumes it.
func (s *Server) Pause() {
	s.mustOwn("Pause")
	if s.alive() {
		_ = s.cmd.Process.Signal(syscall.SIGSTOP)
	}
}

// Continue resumes a server frozen by Pause (SIGCONT).
func (s *Server) Continue() {
	if s.alive() {
		_ = s.cmd.Process.Signal(syscall.SIGCONT)
	}
}

// Kill9 kills the server with SIGKILL, as a crash would.
func (s *Server) Kill9() {
	s.mustOwn("Kill9")
	s.kill9()
}

func (s *Server) kill9() {
	if !s.signal(syscall.SIGKILL, 10*time.Second) {
		s.t.Fatalf("redistest: redis-server did not die on SIGKILL")
	}
}

// Stop stops the server gracefully, killing it if it takes over 3 s.
func (s *Server) Stop() {
	s.mustOwn("Stop")
	s.stop()
}

func (s *Server) stop() {
	// A paused server would hold SIGTERM until the 3 s run out.
	s.Continue()
	if !s.signal(syscall.SIGTERM, 3*time.Second) {
		s.kill9()
	}
}

// Restart starts the server again on the same port and data directory.
func (s *Server) Restart() {
	s.t.Helper()
	s.mustOwn("Restart")
	s.stop()
	if err := s.start(); err != nil {
		s.t.Fatalf("redistest: restart: %v\n%s", err, s.logTail())
	}
}

// Mini returns a fresh miniredis and a client of it.
func Mini(t testing.TB) (*miniredis.Miniredis, *redis.Client) {
	m := miniredis.RunT(t)
	// miniredis re-sorts a sorted set on every access, so a pipeline of
	// big batches can take longer than go-redis's 5 s read timeout under
	// -race on a loaded machine: that is the test double being slow, not
	// a failure of the code under test.
	c := redis.NewClient(&redis.Options{Addr: m.Addr(), ReadTimeout: 30 * time.Second})
	t.Cleanup(func() { c.Close() })
	return m, c
}

// Backend is one Redis a behavioural test runs against.
type Backend struct {
	Name   string
	Client redis.UniversalClient
	Mini   *miniredis.Miniredis // nil on a real server
	Real   *Server              // nil on miniredis and on a Cluster
	// Cluster is the 3-master Cluster the client reaches; nil otherwise.
	Cluster *Cluster
	// Shards is the shard count the test should create its namespace with;
	// 0 leaves the default.
	Shards int
}

// ForEach runs fn against a fresh miniredis ("mini") and a real
// redis-server ("real"), where real Redis decides when they disagree. The
// real server is the one the test binary shares (SharedServer), so fn must
// keep to its own namespace and leave the server as it found it; a test
// that cannot uses ForEachPrivate. The binary's TestMain runs its tests
// through Shared.
func ForEach(t *testing.T, fn func(t *testing.T, b *Backend)) {
	forEach(t, fn, SharedServer)
}

// ForEachPrivate runs fn as ForEach does, but its real arm starts a
// redis-server of its own, stopped when the test ends: for a test that
// kills, restarts or configures the server (CONFIG SET, ACL SETUSER, CLIENT
// KILL) or reads server-wide state (INFO, CLIENT LIST, DBSIZE, SCAN),
// which other tests would disturb on the shared one.
func ForEachPrivate(t *testing.T, fn func(t *testing.T, b *Backend)) {
	forEach(t, fn, func(t testing.TB) *Server { return Start(t, Config{}) })
}

func forEach(t *testing.T, fn func(t *testing.T, b *Backend), server func(testing.TB) *Server) {
	t.Run("mini", func(t *testing.T) {
		m, c := Mini(t)
		fn(t, &Backend{Name: "mini", Client: c, Mini: m})
	})
	t.Run("real", func(t *testing.T) {
		s := server(t)
		fn(t, &Backend{Name: "real", Client: s.Client(t), Real: s})
	})
}

// ForEachAll runs fn as ForEach does, and also on a real 3-master Redis
// Cluster, shared by the test binary (see SharedCluster), twice: with an
// unsharded namespace ("cluster") and with 16 shards ("cluster16"). The
// binary's TestMain runs its tests through Shared.
func ForEachAll(t *testing.T, fn func(t *testing.T, b *Backend)) {
	ForEach(t, fn)
	onCluster(t, fn)
}

// ForEachAllPrivate runs fn as ForEachAll does, with the real arm on a
// redis-server of its own (see ForEachPrivate). The Cluster arms stay on
// the shared Cluster.
func ForEachAllPrivate(t *testing.T, fn func(t *testing.T, b *Backend)) {
	ForEachPrivate(t, fn)
	onCluster(t, fn)
}

func onCluster(t *testing.T, fn func(t *testing.T, b *Backend)) {
	for _, arm := range []struct {
		name   string
		shards int
	}{{"cluster", 0}, {"cluster16", 16}} {
		t.Run(arm.name, func(t *testing.T) {
			c := SharedCluster(t)
			fn(t, &Backend{Name: arm.name, Client: c.Client(t), Cluster: c, Shards: arm.shards})
		})
	}
}

// Namespace returns a timerq namespace unique to the test.
func Namespace(t testing.TB) string {
	var b [3]byte
	_, _ = rand.Read(b[:])
	name := []byte(t.Name())
	for i, c := range name {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.') {
			name[i] = '_'
		}
	}
	if len(name) > 50 {
		name = name[len(name)-50:]
	}
	return string(name) + "-" + hex.EncodeToString(b[:])
}

// AwaitRedials waits up to 3 s for go-redis's background redials to end.
// After a dial is refused, a go-redis pool redials on a goroutine of its
// own every second until it connects or the pool is closed; so a test
// whose client dialled a dead server calls it after closing the client,
// or goleak finds that goroutine still asleep.
func AwaitRedials(t testing.TB) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if !strings.Contains(string(buf[:n]), "go-redis/v9/internal/pool.(*ConnPool).tryDial") {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("redistest: a go-redis redial goroutine outlived its client's Close by 3 s")
			return
		}
		// Polling with a deadline: the goroutine belongs to go-redis and
		// signals nothing when it ends.
		time.Sleep(20 * time.Millisecond)
	}
}
