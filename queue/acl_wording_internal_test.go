package queue

import (
	"crypto/sha1"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/scripts/lua"
)

// scriptError is an error reply as go-redis returns it.
type scriptError string

func (e scriptError) Error() string { return string(e) }
func (scriptError) RedisError()     {}

var _ redis.Error = scriptError("")

// TestScriptACLRefusalsOfRedisAndValkey: an ACL refusal inside a script is
// ErrPermission with the rule to grant, in Redis 7.0's words and in Valkey
// 8's (captured from valkey-server 8.0.1), whose command refusal names the
// user, here one whose name holds "key" and "channel". Other errors that
// say "can't" are not refusals.
func TestScriptACLRefusalsOfRedisAndValkey(t *testing.T) {
	_, rdb := redistest.Mini(t)
	q, err := New(rdb, Options{Namespace: "ns"})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	// A command refused at a line of a script of the table: the table's
	// source names it (workers.lua's HMGET, an unprobed read).
	line := 0
	for i, l := range strings.Split(lua.Workers.Source, "\n") {
		if strings.Contains(l, "redis.call('HMGET'") {
			line = i + 1
		}
	}
	workersHMGET := fmt.Sprintf("ERR The user executing the script can't run this command or subcommand script: %x, on @user_script:%d.",
		sha1.Sum([]byte(lua.Workers.Source)), line)
	for _, tc := range []struct{ reply, hint string }{
		{"ERR The user executing the script can't run this command or subcommand script: 0123, on @user_script:3.", "grant the commands timerq runs"},
		{workersHMGET, "grant it with the ACL rule +hmget"},
		{"ERR The user executing the script can't access at least one of the keys mentioned in the command arguments", "~timerq:{ns}:*"},
		{"ERR The user executing the script can't publish to the channel mentioned in the command", "&timerq:{ns}:*"},
		{"ERR ACL failure in script: User monkey-channel has no permissions to run the 'hset' command script: 0123, on @user_script:3.", "+hset"},
		{"ERR ACL failure in script: No permissions to access a key", "~timerq:{ns}:*"},
		{"ERR ACL failure in script: No permissions to access a channel script: 0123, on @user_script:1.", "&timerq:{ns}:*"},
		{"NOPERM User monkey-channel has no permissions to run the 'evalsha' command", "+evalsha"},
	} {
		err := q.redisError(scriptError(tc.reply))
		if !errors.Is(err, ErrPermission) || !strings.Contains(err.Error(), tc.hint) {
			t.Errorf("%q: %v, want ErrPermission with the hint %q", tc.reply, err, tc.hint)
		}
	}
	for _, reply := range []string{"READONLY You can't write against a read only replica.", "ERR Error running script: can't do that"} {
		if err := q.redisError(scriptError(reply)); errors.Is(err, ErrPermission) {
			t.Errorf("%q taken for an ACL refusal: %v", reply, err)
		}
	}
}
