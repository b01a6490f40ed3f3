package aclright

import (
	"crypto/sha1"
	"fmt"
	"strings"
	"testing"

	lua "github.com/timerq/timerq/scripts/lua"
)

func TestMissingNamesTheRight(t *testing.T) {
	// Redis 7.0's message for a command refused inside a script names the
	// script and line: find the line of claim.lua's HSET.
	line := 0
	for i, l := range strings.Split(lua.Claim.Source, "\n") {
		if strings.Contains(l, "redis.call('HSET'") {
			line = i + 1
		}
	}
	if line == 0 {
		t.Fatal("claim.lua has no HSET")
	}
	inScript := fmt.Sprintf("ERR The user executing the script can't run this command or subcommand script: %x, on @user_script:%d.", sha1.Sum([]byte(lua.Claim.Source)), line)
	for _, tc := range []struct{ msg, want string }{
		{"NOPERM this user has no permissions to run the 'evalsha' command", "+evalsha"},
		{"NOPERM this user has no permissions to access one of the keys used as arguments", "~timerq:{ns}:*"},
		{"NOPERM this user has no permissions to access one of the channels used as arguments", "&timerq:{ns}:*"},
		{"ERR The user executing the script can't publish to the channel mentioned in the command", "&timerq:{ns}:*"},
		{"ERR The user executing the script can't access at least one of the keys mentioned in the command", "~timerq:{ns}:*"},
		{inScript, "+hset"},
		{"ERR The user executing the script can't run this command or subcommand script: 0000000000000000000000000000000000000000, on @user_script:3.", "a command the script runs (see docs/security.md)"},
		// Valkey 8.0's wordings, captured from valkey-server 8.0.1: inside a
		// script (ERR), and outside one (NOPERM), whose command refusal
		// names the user.
		{"ERR ACL failure in script: User monkey-channel has no permissions to run the 'hset' command script: 0000000000000000000000000000000000000000, on @user_script:3.", "+hset"},
		{"ERR ACL failure in script: No permissions to access a key", "~timerq:{ns}:*"},
		{"ERR ACL failure in script: No permissions to access a channel script: 0000000000000000000000000000000000000000, on @user_script:3.", "&timerq:{ns}:*"},
		{"NOPERM User monkey-channel has no permissions to run the 'evalsha' command", "+evalsha"},
		{"NOPERM No permissions to access a key", "~timerq:{ns}:*"},
		{"NOPERM No permissions to access a channel", "&timerq:{ns}:*"},
	} {
		if got := Missing(tc.msg, "ns"); got != tc.want {
			t.Errorf("Missing(%q) = %q, want %q", tc.msg, got, tc.want)
		}
	}
}
