// Package worker is the logic behind cmd/timerworker: it connects to Redis
// (or starts an embedded one in dev mode), runs a poller.Poller and serves
// metrics and health endpoints. The binary only parses flags.
package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"

	"github.com/timerq/timerq/internal/redisurl"
	"github.com/timerq/timerq/poller"
	"github.com/timerq/timerq/queue"
)

// Config is the worker's configuration, one field per timerworker flag.
type Config struct {
	RedisURL        string
	Namespace       string
	BatchSize       int
	MaxPollInterval time.Duration
	// Retention is queue.Options.Retention: 0 for the default, negative to
	// keep settled records forever.
	Retention   time.Duration
	MetricsAddr string // empty: no HTTP server
	Dev         bool
	DevAddr     string
	// StartupTimeout bounds the start-up PING. Default 5 s.
	StartupTimeout time.Duration
}

// Error is a start-up error an operator can fix; it prints as
// "<problem>: <fix>".
type Error struct {
	Problem string
	Fix     string
	Err     error // the cause, if any, for errors.Is
}

func (e *Error) Error() string { return e.Problem + ": " + e.Fix }

func (e *Error) Unwrap() error { return e.Err }

// Run runs the worker until ctx ends, then stops within a few seconds and
// returns nil. It returns an *Error when it cannot start.
func Run(ctx context.Context, cfg Config, log *slog.Logger) error {
	if cfg.StartupTimeout == 0 {
		cfg.StartupTimeout = 5 * time.Second
	}
	if cfg.Retention < 0 {
		cfg.Retention = queue.KeepForever
	}
	if cfg.Dev {
		m := miniredis.NewMiniRedis()
		if err := m.StartAddr(cfg.DevAddr); err != nil {
			return &Error{
				Problem: fmt.Sprintf("--dev cannot listen on --dev-addr %s: %v", cfg.DevAddr, err),
				Fix:     "stop what uses that address, or pick a free one, e.g. --dev-addr 127.0.0.1:6390",
				Err:     err,
			}
		}
		defer m.Close()
		cfg.RedisURL = "redis://" + m.Addr() + "/0"
		log.Warn("timerq: dev mode: serving an embedded in-memory Redis; nothing persists, every timer is lost when timerworker stops",
			"url", cfg.RedisURL)
	}

	opts, err := redisurl.Parse(cfg.RedisURL)
	if err != nil {
		var e *redisurl.Error
		if errors.As(err, &e) {
			return &Error{Problem: e.Problem, Fix: e.Fix, Err: err}
		}
		return err
	}
	// Deadlines must bound calls (the poller's claim timeout, redsync's
	// per-attempt timeout), or a dead server stalls shutdown.
	opts.ContextTimeoutEnabled = true
	if opts.DialTimeout == 0 {
		opts.DialTimeout = 2 * time.Second
	}
	// The poller retries with its own backoff; go-redis's 5 dial attempts
	// per command would only stretch each failed claim during an outage.
	opts.DialerRetries = 2
	rdb := redis.NewUniversalClient(opts)
	defer rdb.Close()
	redacted := redisurl.Redact(cfg.RedisURL)
	if err := ping(ctx, rdb, cfg.StartupTimeout, redacted); err != nil {
		return err
	}

	q, err := queue.New(rdb, queue.Options{Namespace: cfg.Namespace, Retention: cfg.Retention})
	if err != nil {
		return &Error{Problem: err.Error(), Fix: "fix --namespace or --retention", Err: err}
	}
	defer q.Close()
	if err := checkPermissions(ctx, q, cfg.StartupTimeout, log); err != nil {
		return err
	}

	metrics := poller.NewMetrics()
	p, err := poller.New(q, rdb, poller.Options{
		BatchSize:       cfg.BatchSize,
		MaxPollInterval: cfg.MaxPollInterval,
		Logger:          log,
		Hooks:           metrics.Hooks(),
	})
	if err != nil {
		return &Error{Problem: err.Error(), Fix: "fix --batch-size or --max-poll-interval", Err: err}
	}

	var wg sync.WaitGroup
	defer wg.Wait()
	if cfg.MetricsAddr != "" {
		reg := prometheus.NewRegistry()
		if err := metrics.Register(reg); err != nil {
			return fmt.Errorf("registering metrics: %w", err)
		}
		reg.MustRegister(poller.NewPoolCollector(rdb), poller.NewCountersCollector(q),
			collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
		srv, ln, err := listenHTTP(cfg.MetricsAddr, handler(reg, rdb, p))
		if err != nil {
			return err
		}
		log.Info("timerq: serving /metrics, /healthz and /readyz", "addr", ln.Addr().String())
		wg.Go(func() {
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Error("timerq: metrics server failed", "err", err)
			}
		})
		defer func() {
			sctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			_ = srv.Shutdown(sctx)
		}()
	}

	log.Info("timerq: worker started", "redis", redacted, "namespace", q.Namespace(),
		"batch_size", p.Options().BatchSize, "max_poll_interval", p.Options().MaxPollInterval)
	err = p.Run(ctx)
	log.Info("timerq: worker stopped")
	if errors.Is(err, queue.ErrPermission) {
		return &Error{Problem: "timerworker stopped: " + err.Error(), Fix: permissionFix, Err: err}
	}
	return err
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

// ping checks at start-up that Redis answers and accepts the credentials,
// turning the usual failures into a problem and a fix.
func ping(ctx context.Context, rdb redis.UniversalClient, timeout time.Duration, redacted string) error {
	pctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	err := rdb.Ping(pctx).Err()
	if err == nil {
		return nil
	}
	msg := err.Error()
	switch {
	case strings.Contains(msg, "WRONGPASS") || strings.Contains(msg, "invalid password") || strings.Contains(msg, "invalid username-password"):
		return &Error{Problem: fmt.Sprintf("Redis at %s rejected the username or password", redacted),
			Fix: "correct the credentials in --redis (TIMERQ_REDIS_URL), e.g. redis://user:password@host:6379/0", Err: err}
	case strings.Contains(msg, "NOAUTH"):
		return &Error{Problem: fmt.Sprintf("Redis at %s requires a password", redacted),
			Fix: "put it in --redis (TIMERQ_REDIS_URL), e.g. redis://:password@host:6379/0", Err: err}
	case strings.Contains(msg, "without any password configured"):
		return &Error{Problem: fmt.Sprintf("Redis at %s has no password, but --redis gives one", redacted),
			Fix: "remove the password from --redis, or configure requirepass on the server", Err: err}
	}
	return &Error{Problem: fmt.Sprintf("cannot reach Redis at %s (start-up check, %v timeout): %s", redacted, timeout, msg),
		Fix: "start Redis there, fix --redis (TIMERQ_REDIS_URL), or run with --dev for a throwaway in-memory Redis", Err: err}
}

func listenHTTP(addr string, h http.Handler) (*http.Server, net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, nil, &Error{Problem: fmt.Sprintf("cannot listen on --metrics-addr %s: %v", addr, err),
			Fix: "pick a free address, e.g. --metrics-addr 127.0.0.1:9464, or leave it empty to disable metrics", Err: err}
	}
	return &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}, ln, nil
}

// handler serves /metrics, /healthz (the process runs) and /readyz (Redis
// answers PING and a claim succeeded recently, which proves the claim
// script is loaded or loadable).
func handler(reg *prometheus.Registry, rdb redis.UniversalClient, p *poller.Poller) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok\n"))
	})
	fresh := max(3*p.Options().MaxPollInterval, 3*time.Second)
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		if why := notReady(r.Context(), rdb, p, fresh); why != "" {
			http.Error(w, why, http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ready\n"))
	})
	return mux
}

func notReady(ctx context.Context, rdb redis.UniversalClient, p *poller.Poller, fresh time.Duration) string {
	pctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if err := rdb.Ping(pctx).Err(); err != nil {
		return "redis: " + err.Error()
	}
	last := p.LastClaim()
	if last.IsZero() {
		return "no successful claim yet"
	}
	if age := time.Since(last); age > fresh {
		return fmt.Sprintf("last successful claim %v ago", age.Round(time.Millisecond))
	}
	return ""
}
