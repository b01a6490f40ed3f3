// Package worker is the logic behind cmd/timerworker: it connects to Redis
// (or starts an embedded one in dev mode), runs a poller.Poller and serves
// metrics and health endpoints. The binary only parses flags.
package worker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"net/netip"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"

	"github.com/timerq/timerq/api"
	"github.com/timerq/timerq/cmd/internal/apiserver"
	"github.com/timerq/timerq/cmd/internal/cliconf"
	"github.com/timerq/timerq/cmd/internal/otelenv"
	"github.com/timerq/timerq/deliver"
	"github.com/timerq/timerq/deliver/dispatch"
	"github.com/timerq/timerq/poller"
	"github.com/timerq/timerq/queue"
)

// Config is the worker's configuration, one field per timerworker flag.
type Config struct {
	// Conn is --redis and the --tls-* flags.
	Conn cliconf.Conn
	// Namespaces are the namespaces served, each by its own poller on the
	// one shared Redis client. Empty means queue.DefaultNamespace.
	Namespaces      []string
	BatchSize       int
	MaxPollInterval time.Duration
	// MinClaimInterval is poller.Options.MinClaimInterval; 0 for the
	// default.
	MinClaimInterval time.Duration
	// Retention is queue.Options.Retention: 0 for the default, negative to
	// keep settled records forever.
	Retention   time.Duration
	MetricsAddr string // empty: no HTTP server
	// Pprof serves Go's profiles (net/http/pprof) under /debug/pprof/ on
	// MetricsAddr, which it needs.
	Pprof bool
	Dev   bool
	// DevAddr is where --dev listens; empty means the host:port of --redis,
	// so that one TIMERQ_REDIS_URL serves both timerworker --dev and
	// timerctl.
	DevAddr string
	// StartupTimeout bounds the start-up checks. Default 5 s.
	StartupTimeout time.Duration
	// Version labels timerq_build_info; empty reads "unknown".
	Version string

	// API is the HTTP API's server (--api-addr and the other --api-*
	// flags); an empty API.Addr serves no API. Run fills in its Metrics
	// (the --metrics-addr registry) and TracerProvider.
	API apiserver.Config
	// NoClaim runs no poller (--claim=false): the process serves the API
	// and fires nothing, holds no shard, takes no part in maintenance and
	// needs no claim rights. It needs API.Addr.
	NoClaim bool
	// APIHandler builds the handler served at API.Addr; nil means package
	// api's (NewAPIHandler). Tests give a fake.
	APIHandler func(APIEnv) (http.Handler, error)
	// Deliver is push delivery (--deliver and the --deliver-* flags).
	Deliver DeliverConfig
	// APIListening, if not nil, is called with the API's base URL once it
	// listens and SIGHUP reloads its tokens; tests wait for it.
	APIListening func(url string)
}

// APIEnv is what the worker hands to Config.APIHandler.
type APIEnv struct {
	// Redis is the worker's client, shared with its pollers.
	Redis redis.UniversalClient
	// Namespaces are the --namespace list: the ones this deployment's
	// workers fire (a timer in another waits until some worker serves it).
	Namespaces []string
	// Claiming is false in an API-only replica (--claim=false).
	Claiming bool
	// EndpointAllow is --deliver-allow's ranges: endpoint URLs whose
	// host is an address literal in them are admitted.
	EndpointAllow []netip.Prefix
	// Retention is --retention, as the worker's queues use it.
	Retention time.Duration
	// TracerProvider is nil when tracing is off; the queue's spans then go
	// to the global provider, a no-op.
	TracerProvider trace.TracerProvider
	// WriteTimeout is the server's Limits.Write: a long poll or an event
	// stream must move its own write deadline past it (see
	// apiserver.Limits).
	WriteTimeout time.Duration
	Logger       *slog.Logger
}

// Error is a failure an operator can fix; it prints as "<problem>: <fix>".
// It is the type timerctl uses too.
type Error = cliconf.Error

// Run runs the worker until ctx ends, then stops within a few seconds and
// returns nil. It returns an *Error when it cannot start: with
// cliconf.ExitUsage for a bad flag, and cliconf.ExitFailure for a Redis it
// cannot use.
func Run(ctx context.Context, cfg Config, log *slog.Logger) error {
	w := &runner{cfg: cfg, log: log}
	defer w.release()
	if err := w.configure(); err != nil {
		return err
	}
	if err := w.connect(ctx); err != nil {
		return err
	}
	if err := w.openQueues(ctx); err != nil {
		return err
	}
	if err := w.serveMetrics(); err != nil {
		return err
	}
	if err := w.bindAPI(); err != nil {
		return err
	}
	w.logStarted()
	return w.serve(ctx)
}

// runner is one Run: what its phases set up, kept between them as river's
// producer keeps its state, so that each phase is a method and Run reads
// as their list.
type runner struct {
	cfg        Config
	log        *slog.Logger
	namespaces []string
	guard      *deliver.Guard
	tracing    *otelenv.Provider
	rdb        redis.UniversalClient
	redacted   string
	target     cliconf.Target
	sender     *deliver.Sender // nil without --deliver
	all        []served
	reg        *prometheus.Registry // nil without --metrics-addr
	api        *apiserver.Server    // nil without --api-addr

	// undo releases what the phases acquired; release runs it backwards,
	// as defers would, so that nothing is closed before what uses it.
	undo []func()

	// Set by serve.
	hup     chan os.Signal // nil without the API, so its case never fires
	stopAll context.CancelFunc
	errs    []error // each poller's, by its index in all
	apiErr  error
}

// served is one namespace: its queue, its poller (nil with --claim=false)
// and its dispatcher. Every one is on the runner's client: its pool is
// shared, and each poller holds one pub/sub connection of its own.
type served struct {
	q  *queue.Queue
	p  *poller.Poller
	m  *poller.Metrics
	d  *dispatch.Dispatcher // nil without --deliver
	dm *dispatch.Metrics
	// horizon is the due-horizon gauge, which serve refreshes; nil
	// without --metrics-addr.
	horizon *poller.HorizonGauge
}

// onRelease adds f to what release runs.
func (w *runner) onRelease(f func()) { w.undo = append(w.undo, f) }

// release runs what the phases registered, last first.
func (w *runner) release() {
	for i := len(w.undo) - 1; i >= 0; i-- {
		w.undo[i]()
	}
}

// configure fills in the defaults and refuses flags that cannot work,
// before anything starts.
func (w *runner) configure() error {
	cfg := &w.cfg
	if cfg.StartupTimeout == 0 {
		cfg.StartupTimeout = 5 * time.Second
	}
	if cfg.Retention < 0 {
		cfg.Retention = queue.KeepForever
	}
	var err error
	if w.namespaces, err = checkNamespaces(cfg.Namespaces); err != nil {
		return err
	}
	if err := checkAPI(*cfg); err != nil {
		return err
	}
	if w.guard, err = cfg.Deliver.guard(cfg.API.Addr != ""); err != nil {
		return err
	}
	if cfg.Pprof && cfg.MetricsAddr == "" {
		return cliconf.Usage("--pprof is set but --metrics-addr is not", "give --metrics-addr, e.g. --metrics-addr 127.0.0.1:9464: the profiles are served there")
	}
	return nil
}

// connect starts the --dev Redis if asked, tracing, and the Redis client,
// and checks that the server is one the worker can use.
func (w *runner) connect(ctx context.Context) error {
	if w.cfg.Dev {
		stop, err := startDev(&w.cfg, w.log)
		if err != nil {
			return err
		}
		w.onRelease(stop)
	}
	for _, warning := range w.cfg.Conn.Warnings() {
		w.log.Warn("timerq: " + warning)
	}
	opts, err := w.cfg.Conn.Options()
	if err != nil {
		return err
	}
	if w.tracing, err = setupTracing(ctx, w.cfg.Version, w.log); err != nil {
		return err
	}
	w.onRelease(func() {
		// Flush the last spans; a collector that is gone costs at most this.
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := w.tracing.Shutdown(sctx); err != nil {
			w.log.Warn("timerq: flushing OpenTelemetry spans failed", "err", err)
		}
	})
	// Deadlines must bound calls (the poller's claim timeout, redsync's
	// per-attempt timeout), or a dead server stalls shutdown.
	opts.ContextTimeoutEnabled = true
	if opts.DialTimeout == 0 {
		opts.DialTimeout = 2 * time.Second
	}
	// The poller retries with its own backoff; go-redis's 5 dial attempts
	// per command would only stretch each failed claim during an outage.
	opts.DialerRetries = 2
	w.rdb = cliconf.NewClient(opts)
	w.onRelease(func() { _ = w.rdb.Close() })
	w.redacted = w.cfg.Conn.Redacted()
	w.target = cliconf.Target{Redis: w.redacted, Namespace: strings.Join(w.namespaces, ","), Retention: "--retention"}
	return startupChecks(ctx, w.rdb, w.cfg.StartupTimeout, w.target)
}

// openQueues opens one queue per namespace, with its poller unless
// --claim=false and its dispatcher with --deliver.
func (w *runner) openQueues(ctx context.Context) error {
	if w.cfg.Deliver.Enabled {
		w.sender = &deliver.Sender{Guard: w.guard}
		w.onRelease(w.sender.CloseIdleConnections)
	}
	for _, ns := range w.namespaces {
		q, err := queue.New(w.rdb, queue.Options{Namespace: ns, Retention: w.cfg.Retention, TracerProvider: w.tracing.TracerProvider})
		if err != nil {
			return &Error{Code: cliconf.ExitUsage, Problem: err.Error(), Fix: "fix --retention (TIMERQ_RETENTION), e.g. --retention 168h", Err: err}
		}
		w.onRelease(func() { _ = q.Close() })
		s := served{q: q, m: poller.NewMetrics()}
		// An API-only replica claims nothing, so it needs none of the
		// claim rights CheckPermissions checks.
		if !w.cfg.NoClaim {
			if s.p, err = w.newPoller(ctx, q, s.m); err != nil {
				return err
			}
		}
		w.all = append(w.all, w.withDelivery(s))
	}
	return nil
}

// newPoller checks q's claim rights and builds its poller.
func (w *runner) newPoller(ctx context.Context, q *queue.Queue, m *poller.Metrics) (*poller.Poller, error) {
	if err := checkPermissions(ctx, q, w.cfg.StartupTimeout, w.log); err != nil {
		return nil, err
	}
	p, err := poller.New(q, poller.Options{
		BatchSize:        w.cfg.BatchSize,
		MaxPollInterval:  w.cfg.MaxPollInterval,
		MinClaimInterval: w.cfg.MinClaimInterval,
		Logger:           w.log,
		Hooks:            m.Hooks(),
	})
	if err != nil {
		return nil, &Error{Code: cliconf.ExitUsage, Problem: err.Error(), Fix: "fix --batch-size, --max-poll-interval or --min-claim-interval", Err: err}
	}
	return p, nil
}

// withDelivery gives s its dispatcher and the dispatcher's metrics, with
// --deliver.
func (w *runner) withDelivery(s served) served {
	if w.sender != nil {
		s.d = newDispatcher(s.q, w.cfg.Deliver, w.sender, w.log)
		s.dm = dispatch.NewMetrics(s.d.Held)
		s.d.OnAttempt = s.dm.Observe
	}
	return s
}

// serveMetrics serves /metrics, /healthz, /readyz (and the profiles, with
// --pprof) on --metrics-addr, if given.
func (w *runner) serveMetrics() error {
	if w.cfg.MetricsAddr == "" {
		return nil
	}
	w.reg = prometheus.NewRegistry()
	var pollers []namedPoller
	for _, s := range w.all {
		if s.p != nil {
			pollers = append(pollers, namedPoller{s.q.Namespace(), s.p})
		}
	}
	if err := registerAll(w.reg, w.rdb, w.all, w.cfg.Version); err != nil {
		return fmt.Errorf("registering metrics: %w", err)
	}
	w.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	srv, ln, err := listenHTTP(w.cfg.MetricsAddr, handler(w.reg, w.rdb, pollers, w.cfg.Pprof))
	if err != nil {
		return err
	}
	w.log.Info("timerq: serving /metrics, /healthz and /readyz", "addr", ln.Addr().String())
	if w.cfg.Pprof {
		w.log.Warn("timerq: serving Go profiles under /debug/pprof/ (--pprof): keep --metrics-addr off public networks", "addr", ln.Addr().String())
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			w.log.Error("timerq: metrics server failed", "err", err)
		}
	})
	w.onRelease(func() {
		sctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
		wg.Wait()
	})
	return nil
}

// bindAPI builds the API's handler and binds its server, with
// --api-addr.
func (w *runner) bindAPI() error {
	if w.cfg.API.Addr == "" {
		return nil
	}
	api, release, err := listenAPI(w.cfg, w.rdb, w.namespaces, w.reg, w.tracing.TracerProvider, w.guard.Allow, w.log)
	if err != nil {
		return err
	}
	w.api = api
	w.onRelease(release) // after serve returned: no request is left
	return nil
}

// logStarted says what this process does.
func (w *runner) logStarted() {
	ns := strings.Join(w.namespaces, ",")
	if !w.cfg.NoClaim {
		o := w.all[0].p.Options()
		w.log.Info("timerq: worker started", "redis", w.redacted, "namespaces", ns,
			"batch_size", o.BatchSize, "max_poll_interval", o.MaxPollInterval)
		return
	}
	role := "API-only replica"
	switch {
	case w.cfg.Deliver.Enabled && w.cfg.API.Addr != "":
		role = "API and delivery replica"
	case w.cfg.Deliver.Enabled:
		role = "delivery-only replica"
	}
	w.log.Info("timerq: "+role+" started: claiming nothing (--claim=false)", "redis", w.redacted, "namespaces", ns)
}

// serve runs the pollers, dispatchers and API server until ctx ends or
// one of them fails, and returns the failure an operator must see.
func (w *runner) serve(ctx context.Context) error {
	// A poller that gives up (a missing ACL right) or an API server whose
	// listener fails stops the rest: the process exits and the operator
	// sees why, rather than a worker that serves part of its job.
	rctx, stopAll := context.WithCancel(ctx)
	defer stopAll()
	w.stopAll = stopAll
	var run sync.WaitGroup
	w.runPollers(rctx, &run)
	w.runHorizons(rctx, &run)
	w.runDelivery(rctx, &run)
	w.runAPI(rctx, &run)
	for {
		select {
		case <-w.hup:
			// SIGHUP rereads the API's tokens file and TLS files; Reload
			// logs what failed, and keeps the old.
			_ = w.api.Reload()
		case <-rctx.Done():
			run.Wait()
			w.log.Info("timerq: worker stopped")
			return w.failure()
		}
	}
}

// runPollers starts every namespace's poller.
func (w *runner) runPollers(rctx context.Context, run *sync.WaitGroup) {
	w.errs = make([]error, len(w.all))
	for i, s := range w.all {
		if s.p == nil {
			continue
		}
		run.Go(func() {
			if w.errs[i] = s.p.Run(rctx); w.errs[i] != nil {
				w.stopAll()
			}
		})
	}
}

// runHorizons refreshes every namespace's due-horizon gauge, with
// --metrics-addr: one read per shard per poller.DefaultHorizonInterval,
// whatever the scrapes.
func (w *runner) runHorizons(rctx context.Context, run *sync.WaitGroup) {
	for _, s := range w.all {
		if s.horizon != nil {
			run.Go(func() { s.horizon.Run(rctx) })
		}
	}
}

// runDelivery starts every namespace's dispatcher, with --deliver.
func (w *runner) runDelivery(rctx context.Context, run *sync.WaitGroup) {
	if !w.cfg.Deliver.Enabled {
		return
	}
	for _, s := range w.all {
		run.Go(func() {
			if err := s.d.Run(rctx); err != nil {
				w.log.Error("timerq: delivery stopped", "namespace", s.q.Namespace(), "err", err)
				w.stopAll()
			}
		})
	}
	w.log.Info("timerq: delivering fires to endpoints (--deliver)", "group", cmp.Or(w.cfg.Deliver.Group, dispatch.DefaultGroup),
		"allow", strings.Join(w.cfg.Deliver.Allow, ","))
}

// runAPI starts the API server, with --api-addr, and listens for SIGHUP.
func (w *runner) runAPI(rctx context.Context, run *sync.WaitGroup) {
	if w.api == nil {
		return
	}
	// SIGHUP reloads the tokens file and the TLS files. Registered
	// before APIListening, so a test's signal is never the default
	// (fatal) one.
	w.hup = make(chan os.Signal, 1)
	signal.Notify(w.hup, syscall.SIGHUP)
	w.onRelease(func() { signal.Stop(w.hup) })
	run.Go(func() {
		if w.apiErr = w.api.Serve(rctx); w.apiErr != nil {
			w.stopAll()
		}
	})
	if w.cfg.APIListening != nil {
		w.cfg.APIListening(w.api.URL())
	}
}

// failure is the error Run returns once everything stopped: the API
// server's, else the first poller's, explained.
func (w *runner) failure() error {
	if w.apiErr != nil {
		return w.apiErr
	}
	for i, err := range w.errs {
		if err != nil {
			// The hint names that namespace's rights, not the list's.
			t := w.target
			t.Namespace = w.all[i].q.Namespace()
			return cliconf.Explain(err, t)
		}
	}
	return nil
}

// checkAPI refuses --api-* flags that cannot work together, before
// anything starts.
func checkAPI(cfg Config) error {
	a := cfg.API
	if a.Addr == "" {
		if cfg.NoClaim && !cfg.Deliver.Enabled {
			return cliconf.Usage("--claim=false without --"+apiserver.FlagAddr+" would serve nothing",
				"give --"+apiserver.FlagAddr+" for an API-only replica, or drop --claim=false")
		}
		for _, f := range []struct {
			flag string
			set  bool
		}{{apiserver.FlagTokensFile, a.TokensFile != ""}, {apiserver.FlagTLSCertFile, a.TLSCertFile != ""}, {apiserver.FlagTLSKeyFile, a.TLSKeyFile != ""},
			{apiserver.FlagTLSClientCA, a.TLSClientCAFile != ""}, {apiserver.FlagRateLimit, a.RateLimit != 0 && a.RateLimit != apiserver.DefaultRateLimit}} {
			if f.set {
				return cliconf.Usage("--"+f.flag+" is set but --"+apiserver.FlagAddr+" is not", "give --"+apiserver.FlagAddr+" to serve the HTTP API, e.g. --"+apiserver.FlagAddr+" :8080")
			}
		}
		return nil
	}
	return a.Check()
}

// listenAPI builds the API's handler and binds its server, with the
// request metrics on reg (nil without --metrics-addr).
// The returned func releases the handler, once the server stopped.
func listenAPI(cfg Config, rdb redis.UniversalClient, namespaces []string, reg *prometheus.Registry, tp trace.TracerProvider, allow []netip.Prefix, log *slog.Logger) (*apiserver.Server, func(), error) {
	sc := cfg.API
	if sc.Limits == (apiserver.Limits{}) {
		sc.Limits = apiserver.DefaultLimits()
	}
	if reg != nil {
		sc.Metrics = reg
	}
	sc.TracerProvider = tp
	build := cfg.APIHandler
	if build == nil {
		build = NewAPIHandler
	}
	h, err := build(APIEnv{Redis: rdb, Namespaces: namespaces, Claiming: !cfg.NoClaim, Retention: cfg.Retention,
		TracerProvider: tp, WriteTimeout: sc.Limits.Write, Logger: log, EndpointAllow: allow})
	if err != nil {
		return nil, nil, &Error{Code: cliconf.ExitUsage, Problem: "cannot build the HTTP API: " + err.Error(), Fix: "fix the --api-* flags", Err: err}
	}
	api, err := apiserver.Listen(sc, h, log)
	if err != nil {
		closeHandler(h)
		return nil, nil, err
	}
	auth := "none (loopback only)"
	if sc.TokensFile != "" {
		auth = "bearer tokens from " + sc.TokensFile
	}
	log.Info("timerq: serving the HTTP API", "url", api.URL(), "auth", auth, "client_certificates", sc.TLSClientCAFile != "")
	return api, func() { closeHandler(h) }, nil
}

// NewAPIHandler is package api's handler over the worker's Redis client,
// with the worker's retention and tracer for the namespaces it opens. Its
// routes ask the API server (apiserver.Authorize) for their rights.
func NewAPIHandler(env APIEnv) (http.Handler, error) {
	return api.New(api.Options{
		Client:        env.Redis,
		Queue:         queue.Options{Retention: env.Retention, TracerProvider: env.TracerProvider},
		Logger:        env.Logger,
		EndpointAllow: env.EndpointAllow,
		// A refused address names the flag that admits it, not api's field.
		EndpointAllowSetting: "--deliver-allow (TIMERQ_DELIVER_ALLOW)",
		Authorize:            apiserver.Authorize,
	})
}

// closeHandler releases what a handler holds (package api's namespaces,
// each with a pub/sub connection while someone waits), if it holds any.
func closeHandler(h http.Handler) {
	if c, ok := h.(io.Closer); ok {
		_ = c.Close()
	}
}

// setupTracing switches OpenTelemetry tracing on when the OTEL_*
// environment variables ask for it (cmd/internal/otelenv), and sends the SDK's
// own errors (a collector that cannot be reached) to the log.
func setupTracing(ctx context.Context, version string, log *slog.Logger) (*otelenv.Provider, error) {
	p, err := otelenv.SetupBinary(ctx, "timerworker", version, os.Stderr)
	if err != nil {
		return nil, err
	}
	if p.TracerProvider != nil {
		otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
			log.Warn("timerq: OpenTelemetry", "err", err)
		}))
		log.Info("timerq: tracing on", "exporters", strings.Join(p.Exporters, ","))
	}
	return p, nil
}

// checkNamespaces validates the namespaces and refuses a repeated one,
// which would run two pollers on one namespace for nothing.
func checkNamespaces(in []string) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	for _, ns := range in {
		ns = strings.TrimSpace(ns)
		if ns == "" {
			continue
		}
		if err := queue.ValidateNamespace(ns); err != nil {
			msg := strings.TrimPrefix(err.Error(), "timerq: invalid namespace: ")
			problem, fix, _ := strings.Cut(msg, "; ")
			return nil, &Error{Code: cliconf.ExitUsage, Problem: "--namespace (TIMERQ_NAMESPACE) " + problem,
				Fix: fix + "; separate several with commas, e.g. --namespace orders,billing", Err: err}
		}
		if seen[ns] {
			return nil, &Error{Code: cliconf.ExitUsage, Problem: fmt.Sprintf("--namespace names %q twice", ns),
				Fix: "name each namespace once"}
		}
		seen[ns] = true
		out = append(out, ns)
	}
	if len(out) == 0 {
		out = []string{queue.DefaultNamespace}
	}
	return out, nil
}

// permissionFix follows an error that already names the missing right
// and the ACL rule granting it.
const permissionFix = "grant that right to the Redis user, then start timerworker again"

// checkPermissions checks at start-up that the Redis user may do what the
// worker does (queue.CheckPermissions), so that a missing right is named
// at once rather than at the first due timer. Only a refusal stops the
// start: another error (LOADING, a timeout) is the poller's to retry.
func checkPermissions(ctx context.Context, q *queue.Queue, timeout time.Duration, log *slog.Logger) error {
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	err := q.CheckPermissions(cctx)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, queue.ErrPermission):
		return &Error{Problem: "the Redis user lacks a right timerworker needs: " + err.Error(), Fix: permissionFix, Err: err}
	}
	log.Warn("timerq: start-up permission check failed; starting anyway, claims will retry", "err", err)
	return nil
}

// startDev starts the --dev miniredis, and points cfg.Conn at it.
func startDev(cfg *Config, log *slog.Logger) (func(), error) {
	addr := cfg.DevAddr
	if addr == "" {
		opts, err := cfg.Conn.Options()
		if err != nil {
			return nil, err
		}
		if len(opts.Addrs) != 1 || opts.MasterName != "" || opts.IsClusterMode || opts.TLSConfig != nil {
			return nil, &Error{Code: cliconf.ExitUsage, Problem: fmt.Sprintf("--dev serves a plain single Redis, but --redis %s is not one", cfg.Conn.Redacted()),
				Fix: "give --dev-addr host:port, or a --redis of the form redis://127.0.0.1:6390/0"}
		}
		addr = opts.Addrs[0]
	}
	m := miniredis.NewMiniRedis()
	if err := m.StartAddr(addr); err != nil {
		return nil, &Error{Code: cliconf.ExitFailure,
			Problem: fmt.Sprintf("--dev cannot listen on %s: %v", addr, err),
			Fix: "stop what uses that address, or pick a free port for both binaries: export TIMERQ_REDIS_URL=redis://127.0.0.1:6390/0 in both shells " +
				"(or timerworker --dev --dev-addr 127.0.0.1:6390 with timerctl --redis redis://127.0.0.1:6390/0)",
			Err: err}
	}
	cfg.Conn = cliconf.Conn{RedisURL: "redis://" + m.Addr() + "/0"}
	log.Warn("timerq: dev mode: serving an embedded in-memory Redis; nothing persists, every timer is lost when timerworker stops",
		"url", cfg.Conn.RedisURL, "timerctl", "timerctl --redis "+cfg.Conn.RedisURL)
	return m.Close, nil
}

// startupChecks checks at start-up that Redis answers, accepts the
// credentials and is recent enough, turning the usual failures into a
// problem and a fix.
func startupChecks(ctx context.Context, rdb redis.UniversalClient, timeout time.Duration, t cliconf.Target) error {
	pctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	err := rdb.Ping(pctx).Err()
	if err == nil {
		err = cliconf.CheckServer(pctx, rdb, t.Redis, cliconf.NeedCore)
	}
	if err == nil {
		return nil
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return &Error{Code: cliconf.ExitFailure,
			Problem: fmt.Sprintf("cannot reach Redis at %s (start-up check, %v timeout)", t.Redis, timeout),
			Fix:     "start Redis there, fix --redis (TIMERQ_REDIS_URL), or run with --dev for a throwaway in-memory Redis", Err: err}
	}
	return cliconf.Explain(err, t)
}

func listenHTTP(addr string, h http.Handler) (*http.Server, net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, nil, &Error{Code: cliconf.ExitUsage, Problem: fmt.Sprintf("cannot listen on --metrics-addr %s: %v", addr, err),
			Fix: "pick a free address, e.g. --metrics-addr 127.0.0.1:9464, or leave it empty to disable metrics", Err: err}
	}
	return &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}, ln, nil
}

// handler serves /metrics, /healthz (the process runs) and /readyz (Redis
// answers PING and every namespace's poller claimed recently, which proves
// its claim script is loaded or loadable), and with pprof Go's profiles.
func handler(reg *prometheus.Registry, rdb redis.UniversalClient, pollers []namedPoller, profiles bool) http.Handler {
	mux := http.NewServeMux()
	if profiles {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		if why := notReady(r.Context(), rdb, pollers); why != "" {
			http.Error(w, why, http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ready\n"))
	})
	return mux
}

// namedPoller is a poller and the namespace it serves.
type namedPoller struct {
	ns string
	p  *poller.Poller
}

func notReady(ctx context.Context, rdb redis.UniversalClient, pollers []namedPoller) string {
	pctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if err := rdb.Ping(pctx).Err(); err != nil {
		return "redis: " + err.Error()
	}
	var why []string
	for _, np := range pollers {
		p, ns := np.p, np.ns
		fresh := max(3*p.Options().MaxPollInterval, 3*time.Second)
		last := p.LastClaim()
		if last.IsZero() {
			why = append(why, fmt.Sprintf("namespace %q: no successful claim yet", ns))
		} else if age := time.Since(last); age > fresh {
			why = append(why, fmt.Sprintf("namespace %q: last successful claim %v ago", ns, age.Round(time.Millisecond)))
		}
	}
	return strings.Join(why, "; ")
}

// registerAll registers the process's metrics: the Redis pool once,
// without a namespace label (the namespaces share it), and each served
// namespace's with a namespace label, so that one Prometheus can scrape the
// workers of many namespaces: the poller's counters, the namespace's
// counters recorded by claim.lua, the build info, the backlog gauges that
// every worker reads at scrape time (so alerts on them survive the loss of
// the maintenance holder), the due-horizon gauge (all[i].horizon, which
// serve refreshes) and, with --deliver, its dispatcher's metrics.
func registerAll(reg prometheus.Registerer, rdb redis.UniversalClient, all []served, version string) error {
	if err := reg.Register(poller.NewPoolCollector(rdb)); err != nil {
		return err
	}
	version = cmp.Or(version, "unknown")
	for i := range all {
		s := &all[i]
		ns := prometheus.WrapRegistererWith(prometheus.Labels{"namespace": s.q.Namespace()}, reg)
		if err := s.m.Register(ns); err != nil {
			return err
		}
		s.horizon = poller.NewHorizonGauge(s.q, 0)
		for _, c := range []prometheus.Collector{poller.NewBacklogCollector(s.q, 0),
			poller.NewCountersCollector(s.q), poller.NewBuildInfo(version), s.horizon} {
			if err := ns.Register(c); err != nil {
				return err
			}
		}
		if s.dm != nil {
			if err := s.dm.Register(ns); err != nil {
				return err
			}
		}
	}
	return nil
}
