package main

import (
	"net/http"

	"github.com/timerq/timerq/api"
	"github.com/timerq/timerq/internal/worker"
	"github.com/timerq/timerq/queue"
)

// This build serves the HTTP API: --api-addr gets package api's handler
// (the seam newAPIHandler, nil in a build without this file).
func init() { newAPIHandler = newAPI }

// newAPI builds package api's handler over the worker's Redis client, with
// the worker's retention and tracer for the namespaces it opens.
//
// The handler's namespaces (a pub/sub connection each while someone waits)
// are not closed before the process exits: worker.Run does not close what
// the seam built, and the process's exit ends them.
func newAPI(env worker.APIEnv) (http.Handler, error) {
	return api.New(api.Options{
		Client: env.Redis,
		Queue:  queue.Options{Retention: env.Retention, TracerProvider: env.TracerProvider},
		Logger: env.Logger,
	})
}
