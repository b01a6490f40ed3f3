// Package examples holds timerq's runnable examples, one main package per
// directory. Each runs to completion on an in-memory Redis started in the
// process, or against the Redis at $TIMERQ_REDIS_URL:
//
//	go run ./examples/quickstart
//	TIMERQ_REDIS_URL=redis://127.0.0.1:6379/0 go run ./examples/quickstart -poller
//
// examples_test.go builds and runs every one, against both.
package examples
