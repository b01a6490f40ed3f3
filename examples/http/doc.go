// Package httpexamples holds clients of timerq's HTTP API that we did not
// write, each run by this package's tests against a real timerworker
// (built from cmd/timerworker, serving --api-addr) on standalone Redis, on
// a 16-shard namespace of a 3-master Cluster and (TypeScript) through a
// Sentinel:
//
//   - typescript/: a client generated from api/openapi.json with
//     openapi-typescript and openapi-fetch, driven by node --test;
//   - python/: the standard library's urllib only;
//   - the curl walkthrough in docs/api-curl.md, each command run and its
//     output checked.
//
// The tests need node and npm (Node 20+), python3 and curl; without them
// they skip, unless TIMERQ_REQUIRE_NODE=1 (as in CI), when they fail.
package httpexamples
