package queue

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/redis/go-redis/v9"
)

// The one classification of errors by whether retrying can help, as
// go-redis keeps one in its error.go: the API (a 503 with Retry-After)
// and the binaries (timerctl watch, the hints) ask here rather than keep
// lists of their own.

// transientCodes are the error replies of a server that cannot serve now
// but will: a failover, a restart, a load, a slot move. UNBLOCKED ends a
// blocking read (XREAD) when the server turns replica (REPLICAOF, as in a
// failover) or an operator runs CLIENT UNBLOCK … ERROR: the next read
// goes on.
var transientCodes = []string{"READONLY", "LOADING", "MASTERDOWN", "TRYAGAIN", "CLUSTERDOWN", "UNBLOCKED"}

// Transient reports whether err is one to retry rather than give up on:
// Redis unreachable or a connection lost (Disconnected), a deadline
// passed, or a server in the middle of a failover, restart or load (the
// replies READONLY, LOADING, MASTERDOWN, TRYAGAIN, CLUSTERDOWN and
// UNBLOCKED, so ErrClusterDown too). A refusal (ACL, OOM, WRONGTYPE), a
// MOVED or ASK that the queue's own retries did not outlast (a client
// that treats a Cluster node as a single server), and a cancelled
// context are not transient.
func Transient(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) {
		return false
	}
	for _, code := range transientCodes {
		if redis.HasErrorPrefix(err, code) {
			return true
		}
	}
	var rerr redis.Error
	if errors.As(err, &rerr) {
		return false
	}
	return errors.Is(err, context.DeadlineExceeded) || Disconnected(err)
}

// Disconnected reports whether err is a failure to reach Redis or a lost
// connection, as opposed to an answer Redis gave: a dial that failed
// (ErrUnreachable), a refused, reset or closed connection, a pool with
// no free connection in time, or no Sentinel answering.
func Disconnected(err error) bool {
	// A context's deadline is a net.Error too, but says nothing of the
	// connection.
	if err == nil || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return false
	}
	var ne net.Error
	if errors.As(err, &ne) || errors.Is(err, ErrUnreachable) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, net.ErrClosed) ||
		errors.Is(err, redis.ErrClosed) || errors.Is(err, redis.ErrPoolTimeout) {
		return true
	}
	msg := err.Error()
	for _, s := range []string{"connection refused", "no such host", "i/o timeout", "all sentinels are unreachable", "failed to dial"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}
