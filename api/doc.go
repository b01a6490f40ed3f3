// Package api serves timerq over HTTP, so that a program in any language can
// schedule, inspect, wait for and consume timers. Its Handler is a thin
// adapter over package queue: it knows no key names and keeps no state
// between requests, so any number of replicas may serve one Redis.
//
// The contract is the OpenAPI document served at /v1/openapi.json;
// docs/api.md explains it.
package api
