// Package lua holds timerq's Redis scripts, one .lua file per script, and
// the table that says, for each, what it is loaded from, which keys it
// takes, whether it publishes and which commands it runs (scripts.go).
// The queue's runner, its permission check and package aclright all read
// that table; each .lua file's header gives the script's KEYS, ARGV, reply
// and complexity.
package lua

import (
	"embed"
	"strings"
)

//go:embed *.lua
var files embed.FS

// file returns the text of one .lua file; a missing file is a bug of the
// table, found by the first test that loads the package.
func file(name string) string {
	b, err := files.ReadFile(name + ".lua")
	if err != nil {
		panic("scripts/lua: " + err.Error())
	}
	return string(b)
}

// Sharded returns a script source that announces wakeups with SPUBLISH
// (sharded pub/sub, Redis 7.0+) instead of PUBLISH. Inside a Cluster
// script, a shard channel is slot-checked like a key, so every channel a
// script publishes to carries the hash tag of the script's keys.
func Sharded(src string) string {
	// Every 'PUBLISH' literal: the prelude's redis.pcall('PUBLISH', ...),
	// and the command name its refusal reports (so the ACL hint says
	// +spublish).
	return strings.ReplaceAll(src, "'PUBLISH'", "'SPUBLISH'")
}
