// Package bench is the logic behind cmd/timerbench: it measures timerq
// against a Redis it may wipe, one scenario per function, with real
// timerworker processes doing the firing. The binary only parses flags, so
// tests drive the scenarios directly.
//
// Every clock comparison uses the Redis server's clock (the only clock
// timerq trusts): lateness comes from the fire stream's due and fired
// fields, and local instants (a waiter returning) are converted to server
// time with an offset measured against TIME.
package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/timerq/timerq/queue"
)

// ErrNotEmpty is returned by Open when the database holds keys and Force is
// not set.
var ErrNotEmpty = errors.New("bench: the Redis database is not empty")

// ErrTooLoaded means a scenario could not open its measuring window in
// time: the machine was too loaded to measure. Nothing was measured; run
// it again on a quieter machine, or with a longer --lead.
var ErrTooLoaded = errors.New("the machine is too loaded to measure")

// Config is what every scenario shares.
type Config struct {
	RedisURL    string `flag:"redis" usage:"URL of a Redis database the bench may wipe (empty: start a private redis-server on a free port)"`
	RedisServer string `flag:"redis-server" default:"redis-server" usage:"redis-server binary used when --redis is empty"`
	Force       bool   `flag:"force" usage:"wipe the --redis database even if it holds keys"`
	Namespace   string `flag:"namespace" default:"bench" usage:"timerq namespace"`
	// WorkerBin empty builds timerworker with go build into a temporary
	// directory (the working directory must be inside the timerq module).
	WorkerBin string `flag:"worker-bin" usage:"timerworker binary (empty: go build one into a temporary directory)"`
	Workers   int    `flag:"workers" default:"4" usage:"timerworker processes"`
	BatchSize int    `flag:"batch-size" default:"256" usage:"the workers' --batch-size"`
	// Layout 2 upgrades the scenario's namespace to layout 2 of its keys
	// (queue.Engine.UpgradeLayout) before the scenario starts.
	Layout int `flag:"layout" default:"1" usage:"the namespace's key layout: 1, or 2 (upgraded before the scenario starts)"`
	// Trace turns OpenTelemetry tracing on in the bench's queues (every
	// schedule sampled, so every timer carries a trace) and in the
	// timerworkers (OTEL_* in their environment), all exporting OTLP/HTTP to
	// a sink in this process that counts and drops the spans. Off, the
	// workers get OTEL_TRACES_EXPORTER=none.
	Trace bool `flag:"trace" usage:"OpenTelemetry tracing on in the bench and the workers, every timer traced, spans sent to an OTLP sink in timerbench that drops them"`
	// Owned gives the timers of the memory, steady and burst scenarios an
	// owner and labels (Env.own), to measure what they cost.
	Owned bool `flag:"owned" usage:"memory, steady, burst: every timer has an owner (a 36-character ID shared by 4 timers) and two labels"`
	// Log receives progress lines. Default io.Discard.
	Log io.Writer
	// AppendFsync, when set, turns on the private redis-server's AOF with
	// this appendfsync policy ("always", "everysec" or "no"); "off" or
	// empty leaves persistence off. The chaos scenario needs "always".
	AppendFsync string
}

// Env is an open bench environment: a Redis it owns and the worker binary.
// Close it to stop what it started.
type Env struct {
	cfg    Config
	url    string
	rdb    *redis.Client
	server *exec.Cmd
	exited chan struct{}
	// serverArgs start the private redis-server again after a crash: same
	// port, same data directory.
	serverPath string
	serverArgs []string
	tmpDir     string
	offset     time.Duration // server clock minus local clock
	workers    string
	tracing    *tracing // nil unless Config.Trace
}

// checked fills in the zero fields of cfg and refuses a bad one.
func (cfg Config) checked() (Config, error) {
	withDefaults(&cfg)
	cfg.Log = cmp.Or(cfg.Log, io.Discard)
	if err := queue.ValidateNamespace(cfg.Namespace); err != nil {
		return cfg, fmt.Errorf("bench: --namespace: %w", err)
	}
	if cfg.Workers < 0 {
		return cfg, fmt.Errorf("bench: --workers %d is negative; use 1 or more", cfg.Workers)
	}
	if cfg.BatchSize < 1 || cfg.BatchSize > queue.MaxBatch {
		return cfg, fmt.Errorf("bench: --batch-size %d is outside 1..%d", cfg.BatchSize, queue.MaxBatch)
	}
	return cfg, nil
}

// Open connects to (or starts) the Redis, refuses a non-empty database
// unless cfg.Force, and wipes it. The first scenario that needs workers
// builds timerworker unless cfg.WorkerBin names one.
func Open(ctx context.Context, cfg Config) (_ *Env, err error) {
	if cfg, err = cfg.checked(); err != nil {
		return nil, err
	}
	e := &Env{cfg: cfg, url: cfg.RedisURL}
	defer func() {
		if err != nil {
			e.Close()
		}
	}()
	e.tmpDir, err = os.MkdirTemp("", "timerbench-")
	if err != nil {
		return nil, fmt.Errorf("bench: temporary directory: %w; set TMPDIR to a writable directory", err)
	}
	if e.url == "" {
		if err := e.startRedis(ctx); err != nil {
			return nil, err
		}
	}
	opts, err := redis.ParseURL(e.url)
	if err != nil {
		return nil, fmt.Errorf("bench: --redis %q: %w; use redis://host:port/db", e.url, err)
	}
	opts.ClientName = "timerbench-main"
	// FLUSHDB of ten million timers takes longer than go-redis's 5 s.
	opts.ReadTimeout = 2 * time.Minute
	e.rdb = redis.NewClient(opts)
	n, err := e.rdb.DBSize(ctx).Result()
	if err != nil {
		return nil, fmt.Errorf("bench: cannot reach Redis at %s: %w; start it or fix --redis", opts.Addr, err)
	}
	if n > 0 && !cfg.Force {
		return nil, fmt.Errorf("%w: database %d at %s holds %d keys; point --redis at an empty database, or pass --force to let timerbench wipe it",
			ErrNotEmpty, opts.DB, opts.Addr, n)
	}
	if err := e.wipe(ctx); err != nil {
		return nil, err
	}
	if err := e.measureOffset(ctx); err != nil {
		return nil, err
	}
	if cfg.Trace {
		if e.tracing, err = startTracing(ctx); err != nil {
			return nil, err
		}
	}
	e.workers = cfg.WorkerBin
	return e, nil
}

// Close stops the redis-server the bench started, if any, and removes its
// temporary files.
func (e *Env) Close() {
	e.tracing.close()
	if e.rdb != nil {
		_ = e.rdb.Close()
	}
	if e.server != nil && e.server.Process != nil {
		terminate(e.server.Process, e.exited, 5*time.Second)
	}
	if e.tmpDir != "" {
		_ = os.RemoveAll(e.tmpDir)
	}
}

func (e *Env) logf(format string, args ...any) {
	fmt.Fprintf(e.cfg.Log, "timerbench: "+format+"\n", args...)
}

// startRedis starts a private redis-server without persistence on a free
// port; Close stops it by pid.
func (e *Env) startRedis(ctx context.Context) error {
	path, err := exec.LookPath(e.cfg.RedisServer)
	if err != nil {
		return fmt.Errorf("bench: %w; install redis-server, pass --redis-server PATH, or pass --redis URL", err)
	}
	port, args, err := serverArgs(filepath.Join(e.tmpDir, "redis"))
	if err != nil {
		return err
	}
	persist := []string{"--appendonly", "no"}
	switch f := e.cfg.AppendFsync; f {
	case "", "off":
	case "always", "everysec", "no":
		persist = []string{"--appendonly", "yes", "--appendfsync", f}
	default:
		return fmt.Errorf("bench: --appendfsync %q is not a policy; use always, everysec, no or off", f)
	}
	e.serverPath = path
	e.serverArgs = append(args, persist...)
	e.url = fmt.Sprintf("redis://127.0.0.1:%d/0", port)
	return e.launchRedis(ctx)
}

// serverArgs makes the data directory dir and returns a free loopback
// port and the redis-server arguments to serve it from dir, logging to
// dir/redis.log, without RDB snapshots.
func serverArgs(dir string) (int, []string, error) {
	port, err := freePort()
	if err == nil {
		err = os.Mkdir(dir, 0o700)
	}
	if err != nil {
		return 0, nil, fmt.Errorf("bench: %w", err)
	}
	return port, []string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", dir,
		"--save", "", "--logfile", filepath.Join(dir, "redis.log")}, nil
}

// freePort returns a loopback port that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("no free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// launchRedis starts the private redis-server with e.serverArgs and waits
// until it answers PING, which it does only once it has loaded its AOF.
// The answer must come from the process it started (INFO server's
// process_id): after a crash, another server that took the port would
// otherwise pass for the restarted one, and the chaos would measure it.
func (e *Env) launchRedis(ctx context.Context) error {
	e.server = exec.Command(e.serverPath, e.serverArgs...)
	if err := e.server.Start(); err != nil {
		e.server = nil
		return fmt.Errorf("bench: starting %s: %w", e.serverPath, err)
	}
	e.exited = make(chan struct{})
	go func(c *exec.Cmd, done chan struct{}) { _ = c.Wait(); close(done) }(e.server, e.exited)
	opts, err := redis.ParseURL(e.url)
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	opts.MaxRetries = -1
	c := redis.NewClient(opts)
	defer c.Close()
	log := filepath.Join(e.tmpDir, "redis", "redis.log")
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-e.exited:
			return fmt.Errorf("bench: redis-server exited at start; see %s", log)
		default:
		}
		if c.Ping(ctx).Err() == nil {
			pid, err := serverPID(ctx, c)
			if err == nil && pid == e.server.Process.Pid {
				e.logf("started redis-server pid %d on %s", e.server.Process.Pid, e.url)
				return nil
			}
			_ = e.server.Process.Kill()
			<-e.exited
			if err != nil {
				return fmt.Errorf("bench: the server answering on %s is not the redis-server pid %d that timerbench started: %w; stop whatever listens there and run again",
					e.url, e.server.Process.Pid, err)
			}
			return fmt.Errorf("bench: the server answering on %s is pid %d, not the redis-server pid %d that timerbench started; stop whatever listens there and run again",
				e.url, pid, e.server.Process.Pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return fmt.Errorf("bench: redis-server at %s gave no PING answer within 10s; see %s", e.url, log)
}

// serverPID returns the process_id that the server c reaches reports in
// INFO server.
func serverPID(ctx context.Context, c *redis.Client) (int, error) {
	info, err := c.Info(ctx, "server").Result()
	if err != nil {
		return 0, fmt.Errorf("INFO server: %w", err)
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "process_id:"); ok {
			return strconv.Atoi(v)
		}
	}
	return 0, fmt.Errorf("INFO server has no process_id")
}

// crashRedis kills the private redis-server with SIGKILL, as a crash
// would, waits down, and starts it again on the same port and data
// directory, so that it reloads its AOF.
func (e *Env) crashRedis(ctx context.Context, down time.Duration) error {
	if e.server == nil {
		return fmt.Errorf("bench: no private redis-server to crash; drop --redis")
	}
	_ = e.server.Process.Kill()
	<-e.exited
	e.logf("killed redis-server pid %d (SIGKILL)", e.server.Process.Pid)
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(down):
	}
	return e.launchRedis(ctx)
}

// buildWorker builds cmd/timerworker into the temporary directory.
func (e *Env) buildWorker(ctx context.Context) error {
	out := filepath.Join(e.tmpDir, "timerworker")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, "github.com/timerq/timerq/cmd/timerworker")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("bench: go build timerworker: %w: %s; run timerbench inside the timerq module or pass --worker-bin",
			err, strings.TrimSpace(string(b)))
	}
	e.workers = out
	return nil
}

// wipe empties the database; Open made sure the bench may.
func (e *Env) wipe(ctx context.Context) error {
	if err := e.rdb.FlushDB(ctx).Err(); err != nil {
		return fmt.Errorf("bench: FLUSHDB: %w", err)
	}
	return nil
}

// measureOffset estimates the server clock minus the local clock from the
// fastest of a few TIME round trips.
func (e *Env) measureOffset(ctx context.Context) error {
	best := time.Duration(1 << 62)
	for range 20 {
		t0 := time.Now()
		st, err := e.rdb.Time(ctx).Result()
		if err != nil {
			return fmt.Errorf("bench: TIME: %w", err)
		}
		rtt := time.Since(t0)
		if rtt < best {
			best = rtt
			e.offset = st.Sub(t0.Add(rtt / 2))
		}
	}
	return nil
}

// serverNow is the local clock converted to the server's.
func (e *Env) serverNow() time.Time { return time.Now().Add(e.offset) }

// toServerMs converts a local instant to server Unix milliseconds, with a
// fraction.
func (e *Env) toServerMs(t time.Time) float64 {
	return float64(t.Add(e.offset).UnixNano()) / 1e6
}

func (e *Env) queue(rdb redis.UniversalClient) (*queue.Queue, error) {
	opts := queue.Options{Namespace: e.cfg.Namespace}
	if e.tracing != nil {
		opts.TracerProvider = e.tracing.tp
	}
	q, err := queue.New(rdb, opts)
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	return q, nil
}

// ownQueue returns a queue on a client of its own, named name, with a pool
// of pool connections (0: go-redis's default), and a func closing both.
func (e *Env) ownQueue(name string, pool int) (*queue.Queue, func(), error) {
	rdb, err := e.client(name, pool)
	if err != nil {
		return nil, nil, err
	}
	q, err := e.queue(rdb)
	if err != nil {
		rdb.Close()
		return nil, nil, err
	}
	return q, func() { q.Close(); rdb.Close() }, nil
}

// client returns a new client of the bench's Redis named name.
func (e *Env) client(name string, pool int) (*redis.Client, error) {
	opts, err := redis.ParseURL(e.url)
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	opts.ClientName = name
	if pool > 0 {
		opts.PoolSize = pool
	}
	return redis.NewClient(opts), nil
}

// info returns one numeric field of INFO section.
func (e *Env) info(ctx context.Context, section, field string) (float64, error) {
	s, err := e.rdb.Info(ctx, section).Result()
	if err != nil {
		return 0, fmt.Errorf("bench: INFO %s: %w", section, err)
	}
	f, ok := infoField(s, field)
	if !ok {
		return 0, fmt.Errorf("bench: INFO %s has no number %s", section, field)
	}
	return f, nil
}

// infoField returns the numeric field of an INFO answer s.
func infoField(s, field string) (float64, bool) {
	for line := range strings.SplitSeq(s, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok && k == field {
			f, err := strconv.ParseFloat(v, 64)
			return f, err == nil
		}
	}
	return 0, false
}

// redisCPU returns the server's user+system CPU seconds so far.
func (e *Env) redisCPU(ctx context.Context) float64 {
	u, err1 := e.info(ctx, "cpu", "used_cpu_user")
	s, err2 := e.info(ctx, "cpu", "used_cpu_sys")
	if err1 != nil || err2 != nil {
		return 0
	}
	return u + s
}

// selfCPU returns this process's user+system CPU seconds so far.
func selfCPU() float64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// waitUntil polls cond every interval until it holds or d passes.
func waitUntil(ctx context.Context, d, interval time.Duration, cond func() (bool, error)) error {
	deadline := time.Now().Add(d)
	for {
		ok, err := cond()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return context.DeadlineExceeded
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(interval):
		}
	}
}

// own gives t, the i-th timer of a run, an owner and two labels when
// Config.Owned asks for them: a durable-execution engine's timer, whose
// workflow (a UUID-sized ID) owns a few timers.
func (e *Env) own(t queue.NewTimer, i int) queue.NewTimer {
	if !e.cfg.Owned {
		return t
	}
	t.Owner = fmt.Sprintf("wf-%032d", i/4)
	t.Labels = map[string]string{"tenant": fmt.Sprintf("t%03d", i%100), "kind": "sleep"}
	return t
}
