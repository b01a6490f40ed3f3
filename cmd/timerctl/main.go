// Command timerctl is the operator's command line for timerq: schedule,
// inspect, cancel, reschedule, fire and wait on timers, import and export
// them, and watch them fire. Run `timerctl --help` for the commands and
// exit codes; docs/timerctl.md has the details and the JSON schema.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/redis/go-redis/v9"

	"github.com/timerq/timerq/cmd/internal/ctl"
)

// version is set at build time with -ldflags "-X main.version=v1.2.3".
var version = ""

// quiet drops go-redis's internal log lines ("failed to dial after 5
// attempts"): the error that reaches the user already says it, once.
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

func main() {
	redis.SetLogger(quiet{})
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := ctl.Run(ctx, os.Args, ctl.Options{Version: version})
	stop()
	os.Exit(code)
}
