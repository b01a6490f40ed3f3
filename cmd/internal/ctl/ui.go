package ctl

import (
	"cmp"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/timerq/timerq/api/apitoken"
	"github.com/timerq/timerq/cmd/internal/apiserver"
	"github.com/timerq/timerq/cmd/internal/cliconf"
	"github.com/timerq/timerq/deliver/dispatch"
	"github.com/timerq/timerq/queue"
	"github.com/timerq/timerq/ui"
)

// DefaultUIListen is where `timerctl ui` listens unless --listen says
// otherwise: loopback, so a dashboard without auth is not on the network.
const DefaultUIListen = "127.0.0.1:8080"

// The dashboard's credentials come from files or the environment, never
// from a flag's value, which any user can read in the process list.
const (
	envUIToken     = "TIMERQ_UI_TOKEN"
	envUIBasicAuth = "TIMERQ_UI_BASIC_AUTH"
)

func (r *runner) uiCommand() *cli.Command {
	return &cli.Command{
		Name:      "ui",
		Usage:     "serve the web dashboard of the namespace",
		ArgsUsage: " ",
		Description: `Serves the dashboard (package ui) until Ctrl-C. On a loopback address it
needs no auth; on any other address it refuses to start unless a bearer token
(--token-file or ` + envUIToken + `) or basic auth (--basic-auth-file or
` + envUIBasicAuth + `, as user:password) is set. With a token, a browser logs in
with any user name and the token as the password. See docs/ui.md.`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "listen", Value: DefaultUIListen, EnvVars: []string{"TIMERQ_UI_LISTEN"},
				Usage: "`ADDR` to serve on; anything but loopback requires auth"},
			&cli.BoolFlag{Name: "read-only", EnvVars: []string{"TIMERQ_UI_READ_ONLY"},
				Usage: "hide and refuse every action: cancel, reschedule, fire-now, requeue, redrive, enable and disable of endpoints, and pause, resume and delete of schedules"},
			&cli.StringFlag{Name: "deliver-group", Value: dispatch.DefaultGroup, EnvVars: []string{"TIMERQ_DELIVER_GROUP"},
				Usage: "the delivering replicas' consumer `GROUP` (timerworker --deliver-group), whose dead letters the dashboard lists and redrives"},
			&cli.StringFlag{Name: "prefix", EnvVars: []string{"TIMERQ_UI_PREFIX"},
				Usage: "serve under `PATH`, e.g. /timerq, for a reverse proxy"},
			&cli.StringFlag{Name: "token-file", EnvVars: []string{"TIMERQ_UI_TOKEN_FILE"},
				Usage: "require the bearer token in `FILE` (or set " + envUIToken + ")"},
			&cli.StringFlag{Name: "basic-auth-file", EnvVars: []string{"TIMERQ_UI_BASIC_AUTH_FILE"},
				Usage: "require basic auth with the user:password in `FILE` (or set " + envUIBasicAuth + ")"},
			&cli.IntFlag{Name: "max-tails", Value: ui.DefaultMaxTails, EnvVars: []string{"TIMERQ_UI_MAX_TAILS"},
				Usage: "refuse a live tail with 503 while `N` are open over all clients"},
			&cli.IntFlag{Name: "max-tails-per-client", Value: ui.DefaultMaxTailsPerClient, EnvVars: []string{"TIMERQ_UI_MAX_TAILS_PER_CLIENT"},
				Usage: "refuse a live tail with 503 while `N` are open from one IP address (behind a proxy, from the proxy)"},
		},
		Action: noArgs(r.ui),
	}
}

// UIServerLimits bound how long `timerctl ui` waits on a client, so slow or
// idle clients cannot hold its connections: the API server's limits. A
// live tail clears its read deadline and sets a write deadline of Write
// before each of its writes, so it lives as long as its client reads.
// Shutdown is how long live tails get to end at Ctrl-C (0: one second).
type UIServerLimits = apiserver.Limits

// DefaultUIServerLimits are the limits of a dashboard whose Redis calls
// take at most timeout each (--timeout): a page makes several, within one
// timeout, so Write leaves room for it.
func DefaultUIServerLimits(timeout time.Duration) UIServerLimits {
	return UIServerLimits{
		ReadHeader: 5 * time.Second, Read: 15 * time.Second, Write: max(30*time.Second, timeout+10*time.Second),
		Idle: 60 * time.Second, MaxHeaderBytes: 32 << 10, Shutdown: time.Second,
	}
}

// uiAuth is the dashboard's credentials; the zero value is no auth.
type uiAuth struct {
	token      string
	user, pass string
}

func (a uiAuth) none() bool { return a.token == "" && a.user == "" }

func (a uiAuth) String() string {
	switch {
	case a.token != "":
		return "bearer token"
	case a.user != "":
		return "basic auth"
	}
	return "none (loopback only)"
}

// readSecret reads a one-line secret from a file, or from an environment
// variable when the file flag is empty.
func readSecret(c *cli.Context, flag, env string) (string, error) {
	if path := c.String(flag); path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return "", usageErr(fmt.Sprintf("--%s: %v", flag, err), "give a readable file holding the secret on one line")
		}
		s := strings.TrimSpace(string(b))
		if s == "" {
			return "", usageErr(fmt.Sprintf("--%s %s is empty", flag, path), "put the secret in it on one line")
		}
		return s, nil
	}
	return strings.TrimSpace(os.Getenv(env)), nil
}

func uiAuthFrom(c *cli.Context) (uiAuth, error) {
	var a uiAuth
	var err error
	if a.token, err = readSecret(c, "token-file", envUIToken); err != nil {
		return a, err
	}
	basic, err := readSecret(c, "basic-auth-file", envUIBasicAuth)
	if err != nil {
		return a, err
	}
	if basic != "" {
		user, pass, ok := strings.Cut(basic, ":")
		if !ok || user == "" || pass == "" {
			return a, usageErr("basic auth credentials are not user:password", "write them as user:password, with a non-empty password")
		}
		a.user, a.pass = user, pass
	}
	if a.token != "" && a.user != "" {
		return a, usageErr("both a bearer token and basic auth are set", "choose one")
	}
	if len(a.token) > 0 && len(a.token) < 16 || len(a.pass) > 0 && len(a.pass) < 12 {
		return a, usageErr("the dashboard secret is too short to guess-proof", "use at least 16 characters for a token, 12 for a password, e.g. from `openssl rand -hex 16`")
	}
	return a, nil
}

func (r *runner) ui(c *cli.Context) error {
	listen := c.String("listen")
	loop, err := cliconf.IsLoopback(listen)
	if err != nil {
		return usageErr(fmt.Sprintf("--listen %q is not host:port", listen), "use e.g. 127.0.0.1:8080, or :8080 with auth")
	}
	auth, err := uiAuthFrom(c)
	if err != nil {
		return err
	}
	if !loop && auth.none() {
		return usageErr(fmt.Sprintf("refusing to serve the dashboard on %s without auth: anyone who reaches that address could read every timer and payload", listen),
			"set "+envUIToken+" or --token-file, or "+envUIBasicAuth+" or --basic-auth-file, or listen on 127.0.0.1")
	}
	if err := queue.ValidateConsumerName("--deliver-group", c.String("deliver-group")); err != nil {
		return usageErr(strings.TrimPrefix(err.Error(), queue.ErrInvalidOptions.Error()+": "),
			"give the group timerworker --deliver-group uses, e.g. "+dispatch.DefaultGroup)
	}
	s, err := r.open(c)
	if err != nil {
		return err
	}
	defer s.close()
	log := slog.New(slog.NewTextHandler(r.o.Stderr, nil))
	for _, f := range []string{"max-tails", "max-tails-per-client"} {
		if n := c.Int(f); n < 1 {
			return usageErr(fmt.Sprintf("--%s %d is below 1", f, n), "give at least 1; the live tail holds no Redis connection, so a few hundred are cheap")
		}
	}
	lim := DefaultUIServerLimits(s.g.timeout)
	if r.o.UIServer != nil {
		lim = *r.o.UIServer
	}
	h, err := ui.New(s.q, ui.Options{Prefix: c.String("prefix"), AllowWrites: !c.Bool("read-only"), DeliveryGroup: c.String("deliver-group"),
		Timeout: s.g.timeout, Logger: log,
		MaxTails: c.Int("max-tails"), MaxTailsPerClient: c.Int("max-tails-per-client"),
		MaxTailsSetting: "--max-tails", MaxTailsPerClientSetting: "--max-tails-per-client",
		TailWriteTimeout: lim.Write})
	if err != nil {
		return usageErr(strings.TrimPrefix(err.Error(), "timerq: invalid options: "), "fix --prefix")
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return &Error{Code: ExitFailure, Problem: fmt.Sprintf("cannot listen on --listen %s: %v", listen, err),
			Fix: "pick a free address, e.g. --listen 127.0.0.1:8081", Err: err}
	}
	mux := http.NewServeMux()
	mux.Handle(c.String("prefix")+"/", h)
	srv := lim.HTTPServer(authMiddleware(auth, mux), log)
	mode := "read-write"
	if c.Bool("read-only") {
		mode = "read-only"
	}
	fmt.Fprintf(r.o.Stderr, "timerctl: serving the dashboard of namespace %q (Redis %s) at http://%s%s/ (%s, auth: %s); Ctrl-C to stop\n",
		s.g.namespace, s.g.conn.Redacted(), ln.Addr(), c.String("prefix"), mode, auth)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return &Error{Code: ExitFailure, Problem: "the dashboard server stopped: " + err.Error(), Fix: "check --listen", Err: err}
	case <-c.Context.Done():
	}
	// Live tails hold their requests open: give them a moment, then cut.
	sctx, cancel := context.WithTimeout(context.Background(), cmp.Or(lim.Shutdown, time.Second))
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		_ = srv.Close()
	}
	if err := <-done; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// authMiddleware asks for the configured credentials; with none it passes
// every request (isLoopback decided that is safe). The token is accepted
// as "Authorization: Bearer", read as the API server reads its tokens
// (apitoken.Bearer: the scheme in any case), or as the basic-auth
// password of any user, which is how a browser sends it.
func authMiddleware(a uiAuth, next http.Handler) http.Handler {
	if a.none() {
		return loopbackHostOnly(next)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ok := false
		user, pass, basic := r.BasicAuth()
		switch {
		case a.token != "":
			if bearer, found := apitoken.Bearer(r); found {
				ok = secretEqual(bearer, a.token) == 1
			} else if basic {
				ok = secretEqual(pass, a.token) == 1
			}
		case basic:
			// Both compared, always, and the results combined without a
			// branch: a wrong user name must take as long as a wrong
			// password, or the time would tell an attacker the user name.
			ok = secretEqual(user, a.user)&secretEqual(pass, a.pass) == 1
		}
		if !ok {
			w.Header().Set("WWW-Authenticate", `Basic realm="timerq", charset="UTF-8"`)
			http.Error(w, "authentication required", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// secretEqual compares a credential a client sent with the configured one
// in constant time: 1 if equal, else 0. Both are hashed first, so the time
// does not depend on their lengths either. It is a variable so that a test
// can count the comparisons.
var secretEqual = func(got, want string) int {
	g, w := sha256.Sum256([]byte(got)), sha256.Sum256([]byte(want))
	return subtle.ConstantTimeCompare(g[:], w[:])
}

// loopbackHostOnly guards a dashboard without auth against DNS rebinding:
// a web page whose name an attacker re-points at 127.0.0.1 reaches the
// port, but its requests carry the attacker's host name, which is refused.
func loopbackHostOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !cliconf.IsLoopbackHost(r.Host) {
			http.Error(w, "this dashboard has no auth, so it answers only to a loopback address or localhost; "+
				"set a token or basic auth to reach it by another name", http.StatusMisdirectedRequest)
			return
		}
		next.ServeHTTP(w, r)
	})
}
