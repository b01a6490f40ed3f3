// Command timerworker fires the due timers of one timerq namespace. Run any
// number of replicas against one Redis: each timer fires exactly once.
//
//	timerworker --redis redis://127.0.0.1:6379/0 --namespace default
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
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"

	"github.com/redis/go-redis/v9"
	"github.com/urfave/cli/v2"

	"github.com/timerq/timerq/internal/worker"
)

// version is set at build time with -ldflags "-X main.version=v1.2.3".
var version = ""

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := newApp(os.Stdout, os.Stderr).RunContext(ctx, os.Args)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "timerworker: "+oneLine(err))
		os.Exit(1)
	}
}

// oneLine formats err as "<problem>: <fix>" on one line.
func oneLine(err error) string {
	var we *worker.Error
	msg := err.Error()
	if !errors.As(err, &we) {
		msg += ": run 'timerworker --help' for the flags and their TIMERQ_* variables"
	}
	return strings.ReplaceAll(msg, "\n", " ")
}

func newApp(stdout, stderr io.Writer) *cli.App {
	return &cli.App{
		Name:      "timerworker",
		Usage:     "fire the due timers of a timerq namespace",
		Version:   buildVersion(),
		Writer:    stdout,
		ErrWriter: stderr,
		// main prints errors, as one line, and picks the exit code.
		ExitErrHandler: func(*cli.Context, error) {},
		OnUsageError: func(_ *cli.Context, err error, _ bool) error {
			return err
		},
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "redis", Value: "redis://127.0.0.1:6379/0", EnvVars: []string{"TIMERQ_REDIS_URL", "TIMERQ_REDIS"},
				Usage: "Redis URL: redis://[user:password@]host:port/db, rediss:// (TLS), unix://, Sentinel (?master_name=NAME&addr=...) or Cluster (?addr=host2:port...)"},
			&cli.StringFlag{Name: "namespace", Value: "default", EnvVars: []string{"TIMERQ_NAMESPACE"},
				Usage: "timer namespace (1-64 characters of A-Z a-z 0-9 _ . -)"},
			&cli.IntFlag{Name: "batch-size", Value: 256, EnvVars: []string{"TIMERQ_BATCH_SIZE"},
				Usage: "most timers fired per claim (1-1000)"},
			&cli.DurationFlag{Name: "max-poll-interval", Value: 1_000_000_000, EnvVars: []string{"TIMERQ_MAX_POLL_INTERVAL"},
				Usage: "longest sleep between claims when idle"},
			&cli.DurationFlag{Name: "retention", EnvVars: []string{"TIMERQ_RETENTION"},
				Usage: "how long fired and cancelled records are kept before purging (0: 7 days; negative: forever)"},
			&cli.StringFlag{Name: "metrics-addr", EnvVars: []string{"TIMERQ_METRICS_ADDR"},
				Usage: "address serving /metrics, /healthz and /readyz, e.g. :9464 (empty: off)"},
			&cli.StringFlag{Name: "log-format", Value: "text", EnvVars: []string{"TIMERQ_LOG_FORMAT"},
				Usage: "log format: text or json"},
			&cli.StringFlag{Name: "log-level", Value: "info", EnvVars: []string{"TIMERQ_LOG_LEVEL"},
				Usage: "log level: debug, info, warn or error"},
			&cli.BoolFlag{Name: "dev", EnvVars: []string{"TIMERQ_DEV"},
				Usage: "run an embedded in-memory Redis (miniredis) on --dev-addr and use it; nothing persists"},
			&cli.StringFlag{Name: "dev-addr", Value: "127.0.0.1:6379", EnvVars: []string{"TIMERQ_DEV_ADDR"},
				Usage: "address of the --dev Redis"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return &worker.Error{Problem: fmt.Sprintf("unexpected argument %q", c.Args().First()),
					Fix: "timerworker takes flags only; run 'timerworker --help'"}
			}
			log, err := newLogger(stderr, c.String("log-format"), c.String("log-level"))
			if err != nil {
				return err
			}
			// go-redis logs dial failures itself; keep them out of the
			// one-line start-up errors, and at debug level otherwise.
			redis.SetLogger(redisLogger{log})
			return worker.Run(c.Context, worker.Config{
				RedisURL:        c.String("redis"),
				Namespace:       c.String("namespace"),
				BatchSize:       c.Int("batch-size"),
				MaxPollInterval: c.Duration("max-poll-interval"),
				Retention:       c.Duration("retention"),
				MetricsAddr:     c.String("metrics-addr"),
				Dev:             c.Bool("dev"),
				DevAddr:         c.String("dev-addr"),
				Version:         buildVersion(),
			}, log)
		},
	}
}

func newLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, &worker.Error{Problem: fmt.Sprintf("--log-level %q is not a level", level),
			Fix: "use debug, info, warn or error"}
	}
	o := &slog.HandlerOptions{Level: lv}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, o)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, o)), nil
	}
	return nil, &worker.Error{Problem: fmt.Sprintf("--log-format %q is not a format", format), Fix: "use text or json"}
}

// redisLogger sends go-redis's internal log lines to slog at debug level.
type redisLogger struct{ log *slog.Logger }

func (l redisLogger) Printf(ctx context.Context, format string, v ...any) {
	l.log.DebugContext(ctx, "go-redis: "+fmt.Sprintf(format, v...))
}

func buildVersion() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "dev"
}
