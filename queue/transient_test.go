package queue_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/timerq/timerq/queue"
)

// reply is an error reply from Redis.
type reply string

func (r reply) Error() string { return string(r) }
func (reply) RedisError()     {}

// TestTransient pins the one classification the API (503) and the
// binaries (watch's retries, the hints) share.
func TestTransient(t *testing.T) {
	dial := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	for _, c := range []struct {
		err                     error
		transient, disconnected bool
	}{
		{nil, false, false},
		{dial, true, true},
		{fmt.Errorf("%w: %w", queue.ErrUnreachable, dial), true, true},
		{io.EOF, true, true},
		{redis.ErrPoolTimeout, true, true},
		{context.DeadlineExceeded, true, false},
		{context.Canceled, false, false},
		{reply("READONLY You can't write against a read only replica."), true, false},
		{reply("LOADING Redis is loading the dataset in memory"), true, false},
		{reply("UNBLOCKED client unblocked via CLIENT UNBLOCK"), true, false},
		{fmt.Errorf("%w: %w", queue.ErrClusterDown, reply("CLUSTERDOWN The cluster is down")), true, false},
		{fmt.Errorf("%w: %w", queue.ErrSlotMigrating, reply("MOVED 3999 127.0.0.1:6381")), false, false},
		{reply("WRONGTYPE Operation against a key holding the wrong kind of value"), false, false},
		{reply("NOPERM this user has no permissions to run the 'hset' command"), false, false},
		{reply("OOM command not allowed when used memory > 'maxmemory'."), false, false},
	} {
		if got := queue.Transient(c.err); got != c.transient {
			t.Errorf("Transient(%v) = %v, want %v", c.err, got, c.transient)
		}
		if got := queue.Disconnected(c.err); got != c.disconnected {
			t.Errorf("Disconnected(%v) = %v, want %v", c.err, got, c.disconnected)
		}
	}
}
