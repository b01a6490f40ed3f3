// Package httpexamples holds the curl examples of timerq's HTTP API, each
// run by this package's tests against a real timerworker (built from
// cmd/timerworker, serving --api-addr; internal/workertest):
//
//   - the curl walkthrough in docs/api-curl.md, each command run and its
//     output checked;
//   - the curl examples of docs/api.md and docs/security.md, and every
//     route a doc names.
//
// The TypeScript and Python clients that used to live here are packages
// now, under clients/, with tests of their own against a real worker.
//
// The tests need curl and bash; without them they skip, unless
// TIMERQ_REQUIRE_NODE=1 (as in CI), when they fail.
package httpexamples
