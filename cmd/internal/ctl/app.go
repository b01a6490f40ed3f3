// Package ctl is timerctl, the operator's command line for timerq: the
// urfave/cli application, built by NewApp and run by Run, so that tests can
// drive it in-process with buffers, a fixed clock and exit codes captured.
//
// It holds no Redis logic of its own: every command goes through package
// queue, except watch, which follows the fire stream with XREAD.
package ctl

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/urfave/cli/v2"

	"github.com/timerq/timerq/cmd/internal/cliconf"
	"github.com/timerq/timerq/cmd/internal/otelenv"
	"github.com/timerq/timerq/queue"
)

// Defaults of the global flags.
const (
	DefaultRedisURL = cliconf.DefaultRedisURL
	DefaultTimeout  = 5 * time.Second
)

// Options are what the application reads from and writes to. The zero value
// of each field selects the process's own: os.Stdin, os.Stdout, os.Stderr,
// time.Now and a character-device check of the writer.
type Options struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// Now is the clock that the relative times in table output ("in 4m12s",
	// "3h ago") are measured from. Due times never read it: --in and
	// import's "in" are added to the Redis server's clock inside the script.
	Now func() time.Time
	// IsTerminal reports whether w is a terminal; import draws its progress
	// bar on stderr only then.
	IsTerminal func(w io.Writer) bool
	// Version is printed by `timerctl version`; empty reads the module
	// version from the build information.
	Version string
	// Watching, if not nil, is called once watch has fixed where it starts
	// reading the fire stream: every fire from then on is shown. Tests
	// await it instead of sleeping before they fire.
	Watching func()
	// UIServer, if not nil, replaces DefaultUIServerLimits for `timerctl
	// ui`; tests shorten them.
	UIServer *UIServerLimits
}

func (o Options) withDefaults() Options {
	o.Stdin = cmp.Or[io.Reader](o.Stdin, os.Stdin)
	o.Stdout, o.Stderr = cmp.Or[io.Writer](o.Stdout, os.Stdout), cmp.Or[io.Writer](o.Stderr, os.Stderr)
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.IsTerminal == nil {
		o.IsTerminal = isCharDevice
	}
	o.Version = cmp.Or(o.Version, cliconf.BuildVersion(""))
	return o
}

// isCharDevice is a dependency-free terminal check: good enough to decide
// whether to draw a progress bar.
func isCharDevice(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

const exitCodeHelp = `Exit codes:
   0  success
   1  operational failure (Redis unreachable, authentication, I/O)
   2  usage error (unknown flag or command, missing argument, unparsable time
      or duration, invalid ID or namespace); also import with rejected lines
   3  not found
   4  conflict (cancel or reschedule of a fired timer, reschedule of a
      cancelled timer, fire of a settled timer, wait on a timer that got
      cancelled, schedule under an owner epoch that is not the current one)
   5  wait timed out

TIME is RFC 3339 (2026-12-02T19:00:00Z) or Unix time with its unit
(1796238000s, 1796238000000ms); a bare number is refused. DURATION is Go's
syntax (90s, 5m, 1h30m), counted from the Redis server's clock. Flags may
follow the arguments. See
docs/timerctl.md for the JSON schema.`

// NewApp returns the timerctl application. Run it with Run, which turns its
// errors into one-line messages and exit codes; App.Run alone returns them.
func NewApp(o Options) *cli.App {
	o = o.withDefaults()
	usage := func(c *cli.Context, err error, _ bool) error {
		flags := c.App.Flags
		if c.Command != nil {
			flags = append(append([]cli.Flag(nil), c.Command.Flags...), flags...)
		}
		return cliconf.FlagValueError(err, flags, helpFix(c))
	}
	r := &runner{o: o}
	app := &cli.App{
		Name:        "timerctl",
		Usage:       "inspect and operate the durable timers of a timerq namespace",
		Description: exitCodeHelp,
		Version:     o.Version,
		// --version and the version command print cliconf.VersionLine;
		// the command also -o json.
		Reader:               o.Stdin,
		Writer:               o.Stdout,
		ErrWriter:            o.Stderr,
		EnableBashCompletion: true,
		Suggest:              true,
		// Run prints errors on one line and picks the exit code; the default
		// handler would print to the package-level cli.ErrWriter and exit.
		ExitErrHandler: func(*cli.Context, error) {},
		OnUsageError:   usage,
		// Read the global flags here, in the app's own context: in a
		// command's context wait's own --timeout shadows the global one.
		Before: func(c *cli.Context) error {
			r.raw = global{conn: cliconf.ConnFrom(c), namespace: c.String("namespace"),
				output: c.String("output"), timeout: c.Duration("timeout")}
			// An env var set to "" (TIMERQ_OUTPUT= in a script) means unset.
			r.raw.namespace = cmp.Or(r.raw.namespace, queue.DefaultNamespace)
			r.raw.output = cmp.Or(r.raw.output, "table")
			return nil
		},
		Flags: append(cliconf.ConnFlags(),
			&cli.StringFlag{Name: "namespace", Aliases: []string{"n"}, Value: queue.DefaultNamespace, EnvVars: []string{"TIMERQ_NAMESPACE"},
				Usage: "timer namespace (1-64 characters of A-Z a-z 0-9 _ . -)"},
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Value: "table", EnvVars: []string{"TIMERQ_OUTPUT"},
				Usage: "output format: table or json"},
			&cli.DurationFlag{Name: "timeout", Value: DefaultTimeout, EnvVars: []string{"TIMERQ_TIMEOUT"},
				Usage: "timeout of each Redis command, e.g. 5s"},
		),
		// Without an Action, urfave/cli treats an unknown command as a help
		// topic and exits 3, which here means "not found".
		Action: func(c *cli.Context) error {
			if c.Args().Present() {
				return usageErr(fmt.Sprintf("unknown command %q", c.Args().First()), "run 'timerctl --help' for the commands")
			}
			return cli.ShowAppHelp(c)
		},
	}
	app.Commands = append(r.commands(), r.uiCommand(), r.namespaceCommand(), r.apiTokenCommand(), r.endpointsCommand(), r.flowCommand(),
		r.ownerCommand())
	for _, cmd := range app.Commands {
		cmd.OnUsageError = usage
	}
	return app
}

// Run runs timerctl with args (args[0] is the program name) and returns the
// exit code, having printed any error to o.Stderr as one line
// "timerctl: <what went wrong>: <what to do>". Cancelling ctx (Ctrl-C)
// stops watch with exit code 0 and other commands with 1.
//
// Run one at a time in a process: urfave/cli v2 shares its help flag and
// help command between applications, so concurrent Runs race.
func Run(ctx context.Context, args []string, o Options) int {
	o = o.withDefaults()
	app := NewApp(o)
	args2 := reorderArgs(app, args)
	err := cliconf.RepeatedFlag(app, args2)
	if err == nil {
		err = app.RunContext(ctx, args2)
	}
	if err == nil {
		return ExitOK
	}
	e := classify(err, cliconf.Target{})
	if e.Problem != "" {
		// The URL may come from the environment as well as from args.
		secrets := append([]string{os.Getenv("TIMERQ_REDIS_URL"), os.Getenv("TIMERQ_REDIS")}, args...)
		fmt.Fprintln(o.Stderr, "timerctl: "+cliconf.OneLine(redactText(e.Error(), secrets)))
	}
	return e.Code
}

// reorderArgs moves a command's flags ahead of its arguments, so that
// `schedule ID --in 5m` works: Go's flag package, which urfave/cli v2 uses,
// stops at the first argument. Global flags given after the command
// (`list -o json`) move ahead of it. Everything after "--" stays an argument.
func reorderArgs(app *cli.App, args []string) []string {
	if len(args) < 2 || args[len(args)-1] == "--generate-bash-completion" {
		return args
	}
	i := 1
	for i < len(args) && isFlag(args[i]) {
		if args[i] == "--" {
			return args
		}
		if takesValue(app.Flags, args[i]) {
			i++
		}
		i++
	}
	if i >= len(args) {
		return args
	}
	cmd := app.Command(args[i])
	if cmd == nil || cmd.SkipFlagParsing {
		return args
	}
	var globals, flags, pos []string
	rest := args[i+1:]
	for j := 0; j < len(rest); j++ {
		a := rest[j]
		switch {
		case a == "--":
			pos = append(pos, rest[j+1:]...)
			j = len(rest)
		case isFlag(a):
			// A command's own flag wins over a global one of the same
			// name (wait --timeout); an unknown flag stays with the
			// command, which reports it.
			list, dst := cmd.Flags, &flags
			if !hasFlag(cmd.Flags, a) && hasFlag(app.Flags, a) {
				list, dst = app.Flags, &globals
			}
			*dst = append(*dst, a)
			if takesValue(list, a) && j+1 < len(rest) {
				j++
				*dst = append(*dst, rest[j])
			}
		default:
			pos = append(pos, a)
		}
	}
	out := append(append(append([]string(nil), args[:i]...), globals...), args[i])
	out = append(out, flags...)
	if len(pos) > 0 {
		out = append(append(out, "--"), pos...)
	}
	return out
}

func isFlag(a string) bool { return len(a) > 1 && a[0] == '-' }

// hasFlag reports whether arg names one of flags.
func hasFlag(flags []cli.Flag, arg string) bool {
	name, _, _ := strings.Cut(strings.TrimLeft(arg, "-"), "=")
	return cliconf.FindFlag(flags, name) != nil
}

// takesValue reports whether arg is a flag of flags that takes its value
// from the next argument (not --name=value).
func takesValue(flags []cli.Flag, arg string) bool {
	d, ok := cliconf.FindFlag(flags, strings.TrimLeft(arg, "-")).(cli.DocGenerationFlag)
	return ok && d.TakesValue()
}

// runner holds what every command needs.
type runner struct {
	o   Options
	raw global // the global flags as given, validated by globals
}

// global is the global flags.
type global struct {
	conn      cliconf.Conn
	namespace string
	output    string
	json      bool
	timeout   time.Duration
}

func (r *runner) globals() (global, error) {
	g := r.raw
	switch out := r.raw.output; out {
	case "table":
	case "json":
		g.json = true
	default:
		return g, usageErr(fmt.Sprintf("--output %q is not a format", out), "use --output table or --output json")
	}
	if g.timeout <= 0 {
		return g, usageErr(fmt.Sprintf("--timeout %v is not positive", g.timeout), "use a positive duration such as 5s")
	}
	return g, nil
}

// session is one command's connection to a namespace.
type session struct {
	g   global
	rdb redis.UniversalClient
	q   *queue.Queue
	tr  *otelenv.Provider // OpenTelemetry tracing, when OTEL_* asks for it
}

// open validates the global flags, then builds the client and queue; it
// does not contact Redis, so a usage error never costs a round trip.
func (r *runner) open(c *cli.Context) (*session, error) {
	g, err := r.globals()
	if err != nil {
		return nil, err
	}
	if err := queue.ValidateNamespace(g.namespace); err != nil {
		return nil, err
	}
	opts, err := g.conn.Options()
	if err != nil {
		return nil, err
	}
	for _, w := range g.conn.Warnings() {
		fmt.Fprintln(r.o.Stderr, "timerctl: warning: "+w)
	}
	// Without this go-redis ignores context deadlines on reads and writes,
	// and --timeout would not bite on a hung server.
	opts.ContextTimeoutEnabled = true
	// Off unless OTEL_* asks for it (docs/tracing.md): then timerctl
	// schedule's timers carry its trace to their fire.
	tr, err := otelenv.SetupBinary(c.Context, "timerctl", r.o.Version, r.o.Stderr)
	if err != nil {
		return nil, err
	}
	// Standalone, Sentinel or Cluster, as the URL says (as timerworker).
	rdb := cliconf.NewClient(opts)
	q, err := queue.New(rdb, queue.Options{Namespace: g.namespace, TracerProvider: tr.TracerProvider})
	if err != nil {
		rdb.Close()
		return nil, err
	}
	return &session{g: g, rdb: rdb, q: q, tr: tr}, nil
}

func (s *session) close() {
	s.q.Close()
	s.rdb.Close()
	// Flush the command's spans, within --timeout.
	ctx, cancel := context.WithTimeout(context.Background(), s.g.timeout)
	defer cancel()
	_ = s.tr.Shutdown(ctx)
}

// ctx bounds one Redis command by --timeout.
func (s *session) ctx(c *cli.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(c.Context, s.g.timeout)
}

// redisErr explains a failed Redis call, by its cause; nil stays nil.
func (s *session) redisErr(err error) error {
	if e := (*Error)(nil); err == nil || errors.As(err, &e) {
		return err
	}
	return classify(err, s.target())
}

// target is what the session talks to, for the hints.
func (s *session) target() cliconf.Target {
	return cliconf.Target{Redis: s.g.conn.Redacted(), Namespace: s.g.namespace, Timeout: s.g.timeout}
}

func helpFix(c *cli.Context) string {
	if c != nil && c.Command != nil && c.Command.Name != "" && c.Command.Name != c.App.Name {
		return fmt.Sprintf("run 'timerctl %s --help' for its usage", c.Command.Name)
	}
	return "run 'timerctl --help' for the usage"
}
