// Package aclright names the ACL right a Redis refusal points to, so that
// package queue's ErrPermission errors and both binaries' hints say which
// right to grant: a command (+hset), the namespace's keys
// (~timerq:{NS}:*) or its channels (&timerq:{NS}:*). docs/security.md
// lists the rights of each role.
package aclright

import (
	"crypto/sha1"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	lua "github.com/timerq/timerq/scripts/lua"
)

var (
	ruleRe    = regexp.MustCompile(`grant it with the ACL rule (\S+)`)
	commandRe = regexp.MustCompile(`(?i)permissions? to run the '([^']+)' command`)
	// Redis 7.0 names the script and line of a command it refused
	// inside a script, not the command.
	preludeRe = regexp.MustCompile(`the Redis user may not run ([A-Z]+) \(`)
	// A script run by EVALSHA is named by its SHA1, a Redis function
	// (FCALL) by its name.
	scriptLineRe = regexp.MustCompile(`script: ([0-9a-f]{40}|timerq_\w+), on @user_(?:script|function):(\d+)`)
	callRe       = regexp.MustCompile(`redis\.p?call\(\s*'([A-Za-z]+)'`)
)

// scriptSources maps the SHA1 of each script of the table (lua.All), in
// both pub/sub flavours and for both key layouts, to its source, and the
// name of each of its Redis functions to its library.
var scriptSources = func() map[string]string {
	m := map[string]string{}
	for _, entry := range lua.All {
		for _, s := range entry.Layouts() {
			for _, src := range []string{s.Source, s.ShardedSource} {
				m[fmt.Sprintf("%x", sha1.Sum([]byte(src)))] = src
			}
			m[s.Function], m[s.ShardedFunction] = s.Library, s.ShardedLibrary
		}
	}
	return m
}()

// scriptCommand finds the command a script ran at the line Redis names.
func scriptCommand(msg string) string {
	m := scriptLineRe.FindStringSubmatch(msg)
	if m == nil {
		return ""
	}
	lines := strings.Split(scriptSources[m[1]], "\n")
	n, _ := strconv.Atoi(m[2])
	if n < 1 || n > len(lines) {
		return ""
	}
	if c := callRe.FindStringSubmatch(lines[n-1]); c != nil {
		return strings.ToLower(c[1])
	}
	return ""
}

// Missing names the ACL right a refusal message points to, as it
// would appear in an ACL SETUSER line for namespace ns: a command (+evalsha),
// the namespace's keys (~timerq:{ns}:*) or its channels (&timerq:{ns}:*).
// Redis names the command it refused, but not the key or channel.
func Missing(msg, ns string) string {
	lower := strings.ToLower(msg)
	switch {
	case ruleRe.MatchString(msg):
		// timerq's scripts name the rule themselves (scripts/lua/includes/refusal.lua).
		return ruleRe.FindStringSubmatch(msg)[1]
	case commandRe.MatchString(msg):
		return "+" + strings.ToLower(commandRe.FindStringSubmatch(msg)[1])
	case preludeRe.MatchString(msg):
		// The scripts' own refusal names the command (refusal in
		// scripts/lua/includes/refusal.lua), also where Redis gives no script line.
		return "+" + strings.ToLower(preludeRe.FindStringSubmatch(msg)[1])
	case strings.Contains(lower, "can't run this command"):
		if cmd := scriptCommand(msg); cmd != "" {
			return "+" + cmd
		}
		return "a command the script runs (see docs/security.md)"
	case strings.Contains(lower, "channel"):
		return fmt.Sprintf("&timerq:{%s}:*", ns)
	case strings.Contains(lower, "key"):
		return fmt.Sprintf("~timerq:{%s}:*", ns)
	}
	return "see docs/security.md"
}
