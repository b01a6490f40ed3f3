// Package apiserver serves timerworker's HTTP API: it runs the listener
// (timeouts, header cap, TLS and client certificates) around an
// http.Handler, and puts in front of that handler what the handler itself
// does not do: bearer tokens scoped to namespaces and rights (package
// apitoken), per-token rate limits, request metrics per route and status,
// and the caller's W3C trace context.
//
// It knows nothing of the API's resources: any http.Handler can be
// served, and decides what each request needs. Its routes ask Authorize,
// after its router matched, for the right each needs (api.Options.Authorize),
// so the server never reads a path to decide a right. The route in metrics
// and spans is the http.ServeMux pattern the handler matched
// (Request.Pattern), never the raw path, so a timer ID never becomes a
// label.
package apiserver

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/timerq/timerq/api/apitoken"
	"github.com/timerq/timerq/cmd/internal/cliconf"
)

// The timerworker flags that configure the server, named in its errors.
const (
	FlagAddr          = "api-addr"
	FlagTokensFile    = "api-tokens-file"
	FlagTLSCertFile   = "api-tls-cert-file"
	FlagTLSKeyFile    = "api-tls-key-file"
	FlagTLSClientCA   = "api-tls-client-ca-file"
	FlagRateLimit     = "api-rate-limit"
	envTokensFile     = "TIMERQ_API_TOKENS_FILE"
	defaultShutdown   = 5 * time.Second
	defaultMaxHeaders = 32 << 10
)

// DefaultRateLimit is timerworker's --api-rate-limit unless given: the
// requests per second of a token whose line sets no rps=. It is far above
// what an application needs (a batch carries up to 1,000 timers), and
// stops a flood from one leaked or runaway token while the others keep
// working. Raise it with the flag, or one token's with its rps=; 0 lifts
// it.
const DefaultRateLimit = 100

// Limits bound how long the server waits on a client, so that slow or idle
// clients cannot hold its connections.
//
// Write bounds an ordinary response. A request that is held open on
// purpose, a long poll or a Server-Sent Events stream, must move its own
// write deadline (http.ResponseController.SetWriteDeadline, as
// internal/httpstream's Stream does before each write): a long poll to
// just past its own timeout, a stream before every event. Read needs no
// such care: once a request's body is read, net/http clears the read
// deadline.
type Limits struct {
	// ReadHeader bounds reading a request's headers (slowloris).
	ReadHeader time.Duration
	// Read bounds reading a whole request, body included.
	Read time.Duration
	// Write bounds writing a response, from the end of the request's
	// headers.
	Write time.Duration
	// Idle bounds a keep-alive connection between requests.
	Idle time.Duration
	// MaxHeaderBytes caps a request's headers.
	MaxHeaderBytes int
	// Shutdown is how long requests in flight get to finish when the
	// server stops, before their connections are cut.
	Shutdown time.Duration
}

// DefaultLimits are the limits of a Config whose Limits is zero. Read
// leaves a batch create room to upload its body over a slow link; Idle is
// long enough that clients behind a load balancer keep their connections.
func DefaultLimits() Limits {
	return Limits{ReadHeader: 5 * time.Second, Read: 30 * time.Second, Write: 30 * time.Second,
		Idle: 120 * time.Second, MaxHeaderBytes: defaultMaxHeaders, Shutdown: defaultShutdown}
}

// HTTPServer is a server of h bounded by l, which logs its own errors (a
// handshake a client broke off) to log as warnings. Shutdown is the
// caller's to apply.
func (l Limits) HTTPServer(h http.Handler, log *slog.Logger) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: l.ReadHeader, ReadTimeout: l.Read, WriteTimeout: l.Write, IdleTimeout: l.Idle,
		MaxHeaderBytes: l.MaxHeaderBytes, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
}

// Config configures a Server; one field per timerworker --api-* flag,
// plus what the worker hands over.
type Config struct {
	// Addr is host:port to listen on. Anything but a loopback address
	// needs TokensFile.
	Addr string
	// TokensFile is the tokens file (apitoken.Load); empty serves every
	// request without a token, which Listen allows on loopback only.
	TokensFile string
	// TLSCertFile and TLSKeyFile turn TLS on; TLSClientCAFile then
	// requires every client to present a certificate signed by a CA in
	// that file (mutual TLS).
	TLSCertFile, TLSKeyFile, TLSClientCAFile string
	// RateLimit is the requests per second each token may make, unless its
	// line says rps=; 0 means unlimited. The bucket holds one second's
	// worth, at least one request. timerworker's flag defaults to
	// DefaultRateLimit.
	RateLimit float64
	// Limits are the server's timeouts; the zero value means
	// DefaultLimits.
	Limits Limits
	// Metrics, if not nil, gets the request metrics (metrics.go).
	Metrics prometheus.Registerer
	// TracerProvider, if not nil, makes a server span per request, child
	// of the caller's traceparent. Without one the caller's trace context
	// is still put into the request's context, so spans the handler makes
	// (timerq.schedule) continue the caller's trace.
	TracerProvider trace.TracerProvider
	// Now is the clock of the rate limits; nil means time.Now.
	Now func() time.Time
}

// Server is a listening API server. Listen creates it, Serve runs it.
type Server struct {
	cfg     Config
	log     *slog.Logger
	inner   http.Handler
	srv     *http.Server
	ln      net.Listener
	tls     bool
	tokens  atomic.Pointer[apitoken.Set] // nil: no auth (loopback)
	tlsCfg  atomic.Pointer[tls.Config]
	m       *metrics
	tracer  trace.Tracer
	limitMu sync.Mutex
	buckets map[string]*bucket

	// Requests in the handler, so that Serve returns only after the last
	// one: net/http's Close cuts connections but does not wait for their
	// handlers.
	busyMu  sync.Mutex
	busy    int
	drained chan struct{} // closed when busy drops to 0, while Serve waits
}

// Listen checks cfg, loads the tokens file and the TLS files, registers
// the metrics and binds cfg.Addr, all before any request is served. Its
// errors are *cliconf.Error naming the timerworker flag to fix.
func Listen(cfg Config, h http.Handler, log *slog.Logger) (*Server, error) {
	if cfg.Limits == (Limits{}) {
		cfg.Limits = DefaultLimits()
	}
	if cfg.Limits.Shutdown <= 0 {
		cfg.Limits.Shutdown = defaultShutdown
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if err := cfg.Check(); err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, log: log, inner: h, buckets: map[string]*bucket{}}
	if cfg.TracerProvider != nil {
		s.tracer = cfg.TracerProvider.Tracer(tracerName)
	}
	if cfg.TokensFile != "" {
		set, err := apitoken.Load(cfg.TokensFile)
		if err != nil {
			return nil, &cliconf.Error{Code: cliconf.ExitUsage, Problem: "--" + FlagTokensFile + ": " + err.Error(), Err: err}
		}
		s.tokens.Store(set)
	}
	if cfg.TLSCertFile != "" || cfg.TLSKeyFile != "" {
		c, err := loadTLS(cfg)
		if err != nil {
			return nil, err
		}
		s.tlsCfg.Store(c)
		s.tls = true
	}
	var err error
	s.m, err = newMetrics(cfg.Metrics)
	if err != nil {
		return nil, fmt.Errorf("apiserver: registering metrics: %w", err)
	}
	s.m.setTokens(s.tokens.Load(), true)
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return nil, &cliconf.Error{Code: cliconf.ExitUsage, Problem: fmt.Sprintf("cannot listen on --%s %s: %v", FlagAddr, cfg.Addr, err),
			Fix: "pick a free address, e.g. --" + FlagAddr + " 127.0.0.1:8080", Err: err}
	}
	s.ln = ln
	if loop, _ := cliconf.IsLoopback(cfg.Addr); !loop && !s.tls {
		// Once, at start-up: every request's bearer token crosses the
		// network in clear, readable and replayable on the way.
		log.Warn("timerq: the API serves bearer tokens over plain HTTP on "+cfg.Addr+", beyond loopback: anyone on the network path can read and reuse them",
			"fix", "give --"+FlagTLSCertFile+" and --"+FlagTLSKeyFile+", or listen on 127.0.0.1 behind a TLS-terminating proxy on the same host (docs/security.md, \"The API over TLS\")")
	}
	s.srv = cfg.Limits.HTTPServer(s, log)
	if s.tls {
		// Each handshake takes the config Reload stored last, so a renewed
		// certificate is served from the next connection on.
		s.srv.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12,
			GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) { return s.tlsCfg.Load(), nil }}
	}
	return s, nil
}

// Check refuses a Config that cannot work, without reading any file or
// binding: an Addr that is not host:port, an Addr beyond loopback without
// TokensFile (as `timerctl ui` refuses one without auth), a client CA
// without TLS, a negative rate limit. Listen checks it first; timerworker
// also calls it before it connects to Redis.
func (cfg Config) Check() error {
	loop, err := cliconf.IsLoopback(cfg.Addr)
	if err != nil {
		return cliconf.Usage(fmt.Sprintf("--%s %q is not host:port", FlagAddr, cfg.Addr),
			"use e.g. 127.0.0.1:8080, or :8080 with --"+FlagTokensFile)
	}
	if !loop && cfg.TokensFile == "" {
		return cliconf.Usage(fmt.Sprintf("refusing to serve the API on %s without tokens: anyone who reaches that address could read, schedule and cancel every timer", cfg.Addr),
			fmt.Sprintf("give --%s (%s) with lines from 'timerctl api-token create', or listen on 127.0.0.1", FlagTokensFile, envTokensFile))
	}
	if !(cfg.RateLimit >= 0) {
		return cliconf.Usage(fmt.Sprintf("--%s %v is negative", FlagRateLimit, cfg.RateLimit), "give requests per second per token, or 0 for no limit")
	}
	if cfg.TLSClientCAFile != "" && cfg.TLSCertFile == "" && cfg.TLSKeyFile == "" {
		return cliconf.Usage(fmt.Sprintf("--%s is set without --%s and --%s", FlagTLSClientCA, FlagTLSCertFile, FlagTLSKeyFile),
			"client certificates need TLS: give the server's certificate and key too")
	}
	return nil
}

// Addr returns the address the server listens on.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// URL returns the server's base URL, http:// or https://.
func (s *Server) URL() string {
	if s.tls {
		return "https://" + s.ln.Addr().String()
	}
	return "http://" + s.ln.Addr().String()
}

// Limits returns the limits in use. A handler that holds requests open
// needs Write (see Limits).
func (s *Server) Limits() Limits { return s.cfg.Limits }

// Reload reads the tokens file and the TLS files again. What fails to load
// keeps its previous version, so a bad edit never locks every client out
// nor leaves the server without a certificate; the error says why, and is
// logged too. timerworker calls it on SIGHUP.
func (s *Server) Reload() error {
	var errs []error
	if s.cfg.TokensFile != "" {
		set, err := apitoken.Load(s.cfg.TokensFile)
		if err != nil {
			s.log.Error("timerq: API tokens not reloaded; still serving the previous tokens", "file", s.cfg.TokensFile, "err", err)
			errs = append(errs, err)
		} else {
			s.tokens.Store(set)
			s.forgetBuckets(set)
			s.log.Info("timerq: API tokens reloaded", "file", s.cfg.TokensFile, "tokens", set.Len())
		}
		s.m.setTokens(s.tokens.Load(), err == nil)
	}
	if s.tls {
		c, err := loadTLS(s.cfg)
		if err != nil {
			s.log.Error("timerq: API TLS files not reloaded; still serving the previous certificate", "err", err)
			errs = append(errs, err)
		} else {
			s.tlsCfg.Store(c)
			s.log.Info("timerq: API TLS files reloaded", "cert", s.cfg.TLSCertFile)
		}
	}
	return errors.Join(errs...)
}

// Serve serves until ctx ends, then stops taking connections, gives the
// requests in flight Limits.Shutdown to finish, cuts the rest (streams
// that would never end by themselves) and returns nil. It returns an error
// only when the listener fails.
func (s *Server) Serve(ctx context.Context) error {
	done := make(chan error, 1)
	go func() {
		if s.tls {
			done <- s.srv.ServeTLS(s.ln, "", "")
		} else {
			done <- s.srv.Serve(s.ln)
		}
	}()
	select {
	case err := <-done:
		return &cliconf.Error{Problem: "the API server stopped: " + err.Error(), Fix: "check --" + FlagAddr, Err: err}
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), s.cfg.Limits.Shutdown)
	defer cancel()
	if err := s.srv.Shutdown(sctx); err != nil {
		_ = s.srv.Close()
	}
	err := <-done
	// Cut requests see their context end; give them as long again to
	// return. One that ignores its context is a bug of the handler.
	select {
	case <-s.drain():
	case <-time.After(s.cfg.Limits.Shutdown):
		s.log.Error("timerq: API requests still running after shutdown; they ignore their context", "requests", s.inFlight())
	}
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

func (s *Server) enter() {
	s.busyMu.Lock()
	s.busy++
	s.busyMu.Unlock()
}

func (s *Server) leave() {
	s.busyMu.Lock()
	defer s.busyMu.Unlock()
	if s.busy--; s.busy == 0 && s.drained != nil {
		close(s.drained)
		s.drained = nil
	}
}

// drain returns a channel closed once no request is in the handler.
func (s *Server) drain() <-chan struct{} {
	s.busyMu.Lock()
	defer s.busyMu.Unlock()
	ch := make(chan struct{})
	if s.busy == 0 {
		close(ch)
	} else {
		s.drained = ch
	}
	return ch
}

func (s *Server) inFlight() int {
	s.busyMu.Lock()
	defer s.busyMu.Unlock()
	return s.busy
}

// Close releases the listener of a Server that never served.
func (s *Server) Close() error { return s.ln.Close() }

// loadTLS builds the listener's TLS config from the files: TLS 1.2 or
// later, HTTP/2 offered, and with a client CA every client's certificate
// required and verified.
func loadTLS(cfg Config) (*tls.Config, error) {
	switch {
	case cfg.TLSCertFile == "":
		return nil, cliconf.Usage("--"+FlagTLSKeyFile+" is set without --"+FlagTLSCertFile, "pass the server's certificate with --"+FlagTLSCertFile)
	case cfg.TLSKeyFile == "":
		return nil, cliconf.Usage("--"+FlagTLSCertFile+" is set without --"+FlagTLSKeyFile, "pass the certificate's private key with --"+FlagTLSKeyFile)
	}
	pair, err := tls.LoadX509KeyPair(cfg.TLSCertFile, cfg.TLSKeyFile)
	if err != nil {
		return nil, &cliconf.Error{Code: cliconf.ExitUsage,
			Problem: fmt.Sprintf("--%s %q with --%s %q: %v", FlagTLSCertFile, cfg.TLSCertFile, FlagTLSKeyFile, cfg.TLSKeyFile, err),
			Fix:     "pass the server's certificate (chain) and its own private key, both PEM", Err: err}
	}
	c := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{pair}, NextProtos: []string{"h2", "http/1.1"}}
	if cfg.TLSClientCAFile != "" {
		pem, err := os.ReadFile(cfg.TLSClientCAFile)
		if err != nil {
			return nil, &cliconf.Error{Code: cliconf.ExitUsage, Problem: fmt.Sprintf("--%s %q cannot be read: %v", FlagTLSClientCA, cfg.TLSClientCAFile, err),
				Fix: "pass the PEM file of the CA that signs the clients' certificates", Err: err}
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, cliconf.Usage(fmt.Sprintf("--%s %q holds no PEM certificate", FlagTLSClientCA, cfg.TLSClientCAFile),
				"pass the CA certificate in PEM form (a file starting with -----BEGIN CERTIFICATE-----)")
		}
		c.ClientCAs, c.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	return c, nil
}
