// Package clients holds the client packages of timerq's HTTP API, for
// users to install, and the Go tests that run each package's own tests
// against a real timerworker (internal/workertest) on standalone Redis, a
// 16-shard namespace of a 3-master Cluster and (TypeScript) a Sentinel:
//
//   - typescript/: the npm package @timerq/client, whose types are
//     generated from api/openapi.json with openapi-typescript (committed
//     as gen/timerq.d.ts; TestTypeScriptGeneratedIsCurrent fails when the
//     contract changed and it was not regenerated), a small client and
//     verifyWebhook; its tests run with node --test, and
//     TestTypeScriptPackageInstalls installs its npm pack tarball into an
//     empty project, type-checks a user's file and imports it;
//   - python/: the Python package timerq-client, the standard library
//     only, typed with dataclasses, with verify_webhook; its tests run
//     with python3 -m unittest.
//
// Both webhook verifiers are checked against test vectors that
// deliver.Sign makes here, and the TypeScript tests check that the npm
// packages standardwebhooks and svix agree with them.
//
// Owners, labels, bulk cancel and the fencing epoch (issue 37) are not in
// the API yet. When their routes land, TestTypeScriptClientCoversEveryRoute
// fails until typescript/test/api.test.ts calls them; their methods go on
// the packages' clients (Timerq, Client), where a comment marks the place,
// with tests in typescript/test/client.test.ts and
// python/tests/test_client.py; tests/test_types.py fails until the Python
// dataclasses have the fields the contract adds.
//
// The tests need node and npm (Node 20.19+) and python3; without them
// they skip, unless TIMERQ_REQUIRE_NODE=1 (as in CI), when they fail.
// This package has no code of its own.
package clients
