package main

import (
	"net/http"
	"sync"

	"github.com/urfave/cli/v2"

	"github.com/timerq/timerq/api"
	"github.com/timerq/timerq/internal/apiserver"
	"github.com/timerq/timerq/internal/worker"
	"github.com/timerq/timerq/queue"
)

// apiFlags are the flags of the HTTP API (docs/api.md): where it listens,
// its tokens and TLS, and --claim=false for a replica that only serves it.
func apiFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: apiserver.FlagAddr, EnvVars: []string{"TIMERQ_API_ADDR"},
			Usage: "address serving the HTTP API (docs/api.md), e.g. :8080 (empty: off); beyond loopback it needs --" + apiserver.FlagTokensFile},
		&cli.StringFlag{Name: apiserver.FlagTokensFile, EnvVars: []string{"TIMERQ_API_TOKENS_FILE"},
			Usage: "the API's bearer tokens, one hashed token a line; SIGHUP reloads it"},
		&cli.StringFlag{Name: apiserver.FlagTLSCertFile, EnvVars: []string{"TIMERQ_API_TLS_CERT_FILE"},
			Usage: "serve the API over TLS with this certificate (PEM); needs --" + apiserver.FlagTLSKeyFile},
		&cli.StringFlag{Name: apiserver.FlagTLSKeyFile, EnvVars: []string{"TIMERQ_API_TLS_KEY_FILE"},
			Usage: "the private key of --" + apiserver.FlagTLSCertFile + " (PEM)"},
		&cli.StringFlag{Name: apiserver.FlagTLSClientCA, EnvVars: []string{"TIMERQ_API_TLS_CLIENT_CA_FILE"},
			Usage: "require API clients to present a certificate signed by a CA in this file (mutual TLS)"},
		&cli.Float64Flag{Name: apiserver.FlagRateLimit, EnvVars: []string{"TIMERQ_API_RATE_LIMIT"},
			Usage: "API requests per second per token, unless its line says rps= (0: unlimited)"},
		&cli.BoolFlag{Name: "claim", Value: true, EnvVars: []string{"TIMERQ_CLAIM"},
			Usage: "fire timers; --claim=false with --" + apiserver.FlagAddr + " runs a replica that only serves the API"},
	}
}

// withAPI sets cfg's API fields from the flags and wires the worker's
// handler seam to package api. The returned func closes the handler's
// namespaces; call it once worker.Run has returned.
func withAPI(c *cli.Context, cfg *worker.Config) (closeAPI func()) {
	cfg.API = apiserver.Config{
		Addr:            c.String(apiserver.FlagAddr),
		TokensFile:      c.String(apiserver.FlagTokensFile),
		TLSCertFile:     c.String(apiserver.FlagTLSCertFile),
		TLSKeyFile:      c.String(apiserver.FlagTLSKeyFile),
		TLSClientCAFile: c.String(apiserver.FlagTLSClientCA),
		RateLimit:       c.Float64(apiserver.FlagRateLimit),
	}
	cfg.NoClaim = !c.Bool("claim")
	var (
		mu    sync.Mutex
		built []*api.Handler
	)
	cfg.APIHandler = func(env worker.APIEnv) (http.Handler, error) {
		h, err := api.New(api.Options{
			Client: env.Redis,
			Queue:  queue.Options{Retention: env.Retention, TracerProvider: env.TracerProvider},
			Logger: env.Logger,
		})
		if err != nil {
			return nil, err
		}
		mu.Lock()
		built = append(built, h)
		mu.Unlock()
		return h, nil
	}
	return func() {
		mu.Lock()
		defer mu.Unlock()
		for _, h := range built {
			_ = h.Close()
		}
	}
}
