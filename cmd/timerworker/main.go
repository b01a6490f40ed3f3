// Command timerworker fires the due timers of one or more timerq namespaces. Run any
// number of replicas against one Redis: each timer fires exactly once.
//
//	timerworker --redis redis://127.0.0.1:6379/0 --namespace orders,billing
//	timerworker --dev   # embedded in-memory Redis, for trying timerq out
//
// Every flag also reads an environment variable TIMERQ_<FLAG>; see --help.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/redis/go-redis/v9"
	"github.com/urfave/cli/v2"

	"github.com/timerq/timerq/cmd/internal/apiserver"
	"github.com/timerq/timerq/cmd/internal/cliconf"
	"github.com/timerq/timerq/cmd/internal/worker"
	"github.com/timerq/timerq/deliver"
	"github.com/timerq/timerq/deliver/dispatch"
	"github.com/timerq/timerq/poller"
	"github.com/timerq/timerq/queue"
)

// version is set at build time with -ldflags "-X main.version=v1.2.3".
var version = ""

// newAPIHandler replaces package api's handler in tests; nil means
// package api's (worker.NewAPIHandler).
var newAPIHandler func(worker.APIEnv) (http.Handler, error)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run runs timerworker with args and returns its exit code, having printed
// any error as one line "timerworker: <problem>: <fix>".
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	app := newApp(stdout, stderr)
	err := cliconf.RepeatedFlag(app, args)
	if err == nil {
		err = app.RunContext(ctx, args)
	}
	if err == nil {
		return cliconf.ExitOK
	}
	var e *cliconf.Error
	if !errors.As(err, &e) {
		// Only urfave/cli's own errors get here (a TIMERQ_* value it cannot
		// parse): usage errors.
		e = cliconf.FlagValueError(err, flags(), helpFix)
	}
	fmt.Fprintln(stderr, "timerworker: "+cliconf.OneLine(e.Error()))
	return e.ExitCode()
}

const helpFix = "run 'timerworker --help' for the flags and their TIMERQ_* variables"

const description = `Fires the due timers of one or more timerq namespaces. Run any number of
replicas against one Redis: each timer fires exactly once.

Exit codes:
   0  stopped by SIGTERM or SIGINT
   1  runtime failure: Redis unreachable at start, refusing the credentials,
      too old, or refusing a command the worker needs (ACL)
   2  usage error: an unknown flag, a bad value or argument

With --api-addr it also serves the HTTP API (docs/api.md); SIGHUP reloads
its tokens file and TLS files. --claim=false makes an API-only replica.

Tracing is off unless the standard OpenTelemetry variables ask for it:
OTEL_EXPORTER_OTLP_ENDPOINT (OTLP over HTTP) or OTEL_TRACES_EXPORTER=
otlp|console|none, with OTEL_SERVICE_NAME, OTEL_TRACES_SAMPLER, ...
(docs/tracing.md).

See docs/worker.md and, for TLS and ACL users, docs/security.md.`

// flags returns timerworker's flags, fresh on every call.
func flags() []cli.Flag {
	return append(cliconf.ConnFlags(),
		&cli.StringSliceFlag{Name: "namespace", Value: cli.NewStringSlice(queue.DefaultNamespace), EnvVars: []string{"TIMERQ_NAMESPACE"},
			Usage: "timer namespace to serve (1-64 characters of A-Z a-z 0-9 _ . -); several: --namespace a,b or repeat the flag"},
		&cli.IntFlag{Name: "batch-size", Value: poller.DefaultBatchSize, EnvVars: []string{"TIMERQ_BATCH_SIZE"},
			Usage: fmt.Sprintf("most timers fired per claim (1-%d)", queue.MaxBatch)},
		&cli.DurationFlag{Name: "max-poll-interval", Value: poller.DefaultMaxPollInterval, EnvVars: []string{"TIMERQ_MAX_POLL_INTERVAL"},
			Usage: "longest sleep between claims when idle, e.g. 1s or 500ms"},
		&cli.DurationFlag{Name: "min-claim-interval", Value: poller.DefaultMinClaimInterval, EnvVars: []string{"TIMERQ_MIN_CLAIM_INTERVAL"},
			Usage: "least time between a claim that fired timers and the shard's next: timers due in between fire together, at most this late (e.g. 1ms; 1us claims each at its due time)"},
		&cli.DurationFlag{Name: "retention", EnvVars: []string{"TIMERQ_RETENTION"},
			Usage: "how long fired and cancelled records are kept before purging, e.g. 168h (0: 7 days; negative: forever)"},
		&cli.StringFlag{Name: "metrics-addr", EnvVars: []string{"TIMERQ_METRICS_ADDR"},
			Usage: "address serving /metrics, /healthz and /readyz, e.g. :9464 (empty: off)"},
		&cli.BoolFlag{Name: "pprof", EnvVars: []string{"TIMERQ_PPROF"},
			Usage: "also serve Go's CPU, heap and goroutine profiles under /debug/pprof/ on --metrics-addr (keep that address private)"},
		&cli.StringFlag{Name: "log-format", Value: "text", EnvVars: []string{"TIMERQ_LOG_FORMAT"},
			Usage: "log format: text or json"},
		&cli.StringFlag{Name: "log-level", Value: "info", EnvVars: []string{"TIMERQ_LOG_LEVEL"},
			Usage: "log level: debug, info, warn or error"},
		&cli.BoolFlag{Name: "claim", Value: true, EnvVars: []string{"TIMERQ_CLAIM"},
			Usage: "fire due timers; --claim=false runs an API-only replica that claims nothing (needs --" + apiserver.FlagAddr + ")"},
		&cli.StringFlag{Name: apiserver.FlagAddr, EnvVars: []string{"TIMERQ_API_ADDR"},
			Usage: "serve the HTTP API on `ADDR`, e.g. :8080 (empty: off); anything but loopback requires --" + apiserver.FlagTokensFile},
		&cli.StringFlag{Name: apiserver.FlagTokensFile, EnvVars: []string{"TIMERQ_API_TOKENS_FILE"},
			Usage: "require bearer tokens whose hashes are in `FILE` (lines from 'timerctl api-token create'); SIGHUP reloads it"},
		&cli.StringFlag{Name: apiserver.FlagTLSCertFile, EnvVars: []string{"TIMERQ_API_TLS_CERT_FILE"},
			Usage: "serve the API over TLS with the certificate (chain) `PEM` (with --" + apiserver.FlagTLSKeyFile + "); SIGHUP reloads it"},
		&cli.StringFlag{Name: apiserver.FlagTLSKeyFile, EnvVars: []string{"TIMERQ_API_TLS_KEY_FILE"},
			Usage: "private key `PEM` of --" + apiserver.FlagTLSCertFile},
		&cli.StringFlag{Name: apiserver.FlagTLSClientCA, EnvVars: []string{"TIMERQ_API_TLS_CLIENT_CA_FILE"},
			Usage: "require API clients to present a certificate signed by a CA in `PEM` file (mutual TLS)"},
		&cli.Float64Flag{Name: apiserver.FlagRateLimit, Value: apiserver.DefaultRateLimit, EnvVars: []string{"TIMERQ_API_RATE_LIMIT"},
			Usage: "requests per second each API token may make (a burst of one second's worth), unless its line says rps= (0: no limit)"},
		&cli.BoolFlag{Name: "deliver", EnvVars: []string{"TIMERQ_DELIVER"},
			Usage: "deliver the fires of timers that name an endpoint: signed POSTs, retried, dead-lettered (docs/delivery.md); any number of replicas share the work"},
		&cli.StringSliceFlag{Name: "deliver-allow", EnvVars: []string{"TIMERQ_DELIVER_ALLOW"},
			Usage: "CIDRs, addresses or host names deliveries may reach though private or reserved, e.g. 10.1.0.0/16,127.0.0.1/32 (default: none); the API admits endpoint URLs in them"},
		&cli.StringFlag{Name: "deliver-group", Value: dispatch.DefaultGroup, EnvVars: []string{"TIMERQ_DELIVER_GROUP"},
			Usage: "consumer group the delivering replicas share"},
		&cli.IntFlag{Name: "deliver-max-in-flight", Value: dispatch.DefaultMaxOutstanding, EnvVars: []string{"TIMERQ_DELIVER_MAX_IN_FLIGHT"},
			Usage: "most fires one replica holds per namespace, under way or waiting for their endpoint (each endpoint's max_in_flight bounds its own)"},
		&cli.DurationFlag{Name: "deliver-lease", Value: dispatch.DefaultDispatchLease, EnvVars: []string{"TIMERQ_DELIVER_LEASE"},
			Usage: "how long a replica holds a fire before another may deliver it; above the longest endpoint timeout, the same on every replica"},
		&cli.IntFlag{Name: "deliver-max-redirects", EnvVars: []string{"TIMERQ_DELIVER_MAX_REDIRECTS"},
			Usage: fmt.Sprintf("307 and 308 redirects a delivery follows (301-303 never), each hop checked by the guard (0-%d; 0: none)", deliver.MaxRedirects)},
		&cli.BoolFlag{Name: "dev", EnvVars: []string{"TIMERQ_DEV"},
			Usage: "run an embedded in-memory Redis (miniredis) and use it; nothing persists"},
		&cli.StringFlag{Name: "dev-addr", EnvVars: []string{"TIMERQ_DEV_ADDR"},
			Usage: "address of the --dev Redis (default: the host:port of --redis, 127.0.0.1:6379)"},
	)
}

func newApp(stdout, stderr io.Writer) *cli.App {
	return &cli.App{
		Name:        "timerworker",
		Usage:       "fire the due timers of timerq namespaces",
		Description: description,
		Version:     buildVersion(),
		Writer:      stdout,
		ErrWriter:   stderr,
		// timerworker has no commands: a "COMMANDS: help" section would
		// suggest it has (--help and -h stay).
		HideHelpCommand: true,
		// run prints errors, as one line, and picks the exit code.
		ExitErrHandler: func(*cli.Context, error) {},
		OnUsageError: func(c *cli.Context, err error, _ bool) error {
			return cliconf.FlagValueError(err, c.App.Flags, helpFix)
		},
		Flags: flags(),
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return cliconf.Usage(fmt.Sprintf("unexpected argument %q", c.Args().First()),
					"timerworker takes flags only; run 'timerworker --help'")
			}
			if n := c.Int("batch-size"); n < 1 || n > queue.MaxBatch {
				return cliconf.Usage(fmt.Sprintf("--batch-size %d is outside 1-%d", n, queue.MaxBatch),
					fmt.Sprintf("use a claim size in that range, e.g. --batch-size %d", poller.DefaultBatchSize))
			}
			if d := c.Duration("max-poll-interval"); d <= 0 {
				return cliconf.Usage(fmt.Sprintf("--max-poll-interval %v is not positive", d), "use a duration such as 1s or 500ms")
			}
			if d := c.Duration("min-claim-interval"); d <= 0 || d > c.Duration("max-poll-interval") {
				return cliconf.Usage(fmt.Sprintf("--min-claim-interval %v is not above 0 and at most --max-poll-interval (%v)", d, c.Duration("max-poll-interval")),
					"use a short duration such as 1ms or 500us")
			}
			log, err := newLogger(stderr, c.String("log-format"), c.String("log-level"))
			if err != nil {
				return err
			}
			// go-redis logs dial failures itself; keep them out of the
			// one-line start-up errors, and at debug level otherwise.
			redis.SetLogger(redisLogger{log})
			var namespaces []string
			for _, ns := range c.StringSlice("namespace") {
				namespaces = append(namespaces, strings.Split(ns, ",")...)
			}
			return worker.Run(c.Context, worker.Config{
				Conn:             cliconf.ConnFrom(c),
				Namespaces:       namespaces,
				BatchSize:        c.Int("batch-size"),
				MaxPollInterval:  c.Duration("max-poll-interval"),
				MinClaimInterval: c.Duration("min-claim-interval"),
				Retention:        c.Duration("retention"),
				MetricsAddr:      c.String("metrics-addr"),
				Pprof:            c.Bool("pprof"),
				Dev:              c.Bool("dev"),
				DevAddr:          c.String("dev-addr"),
				Version:          buildVersion(),
				NoClaim:          !c.Bool("claim"),
				API: apiserver.Config{
					Addr:            c.String(apiserver.FlagAddr),
					TokensFile:      c.String(apiserver.FlagTokensFile),
					TLSCertFile:     c.String(apiserver.FlagTLSCertFile),
					TLSKeyFile:      c.String(apiserver.FlagTLSKeyFile),
					TLSClientCAFile: c.String(apiserver.FlagTLSClientCA),
					RateLimit:       c.Float64(apiserver.FlagRateLimit),
				},
				APIHandler: newAPIHandler,
				Deliver:    deliverConfig(c),
			}, log)
		},
	}
}

func newLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, &worker.Error{Code: cliconf.ExitUsage, Problem: fmt.Sprintf("--log-level %q is not a level", level),
			Fix: "use debug, info, warn or error"}
	}
	o := &slog.HandlerOptions{Level: lv}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, o)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, o)), nil
	}
	return nil, &worker.Error{Code: cliconf.ExitUsage, Problem: fmt.Sprintf("--log-format %q is not a format", format), Fix: "use text or json"}
}

// redisLogger sends go-redis's internal log lines to slog at debug level.
type redisLogger struct{ log *slog.Logger }

func (l redisLogger) Printf(ctx context.Context, format string, v ...any) {
	l.log.DebugContext(ctx, "go-redis: "+fmt.Sprintf(format, v...))
}

func buildVersion() string { return cliconf.BuildVersion(version) }

// deliverConfig reads the --deliver flags; the --deliver-* flags count as
// set only when given (so that their defaults do not trip the check that
// they need --deliver).
func deliverConfig(c *cli.Context) worker.DeliverConfig {
	d := worker.DeliverConfig{Enabled: c.Bool("deliver"), Allow: c.StringSlice("deliver-allow")}
	if c.IsSet("deliver-group") {
		d.Group = c.String("deliver-group")
	}
	if c.IsSet("deliver-max-in-flight") {
		d.MaxOutstanding = c.Int("deliver-max-in-flight")
	}
	if c.IsSet("deliver-lease") {
		d.Lease = c.Duration("deliver-lease")
	}
	d.MaxRedirects = c.Int("deliver-max-redirects")
	return d
}
