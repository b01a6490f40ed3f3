// Package lua holds timerq's Redis scripts, one .lua file per script, the
// helpers they share (includes/, one function or one tightly bound group
// per file), and the table that says, for each script, which includes it
// uses, which keys it takes, whether it publishes and which commands it
// runs (scripts.go).
// The queue's runner, its permission check and package aclright all read
// that table; each .lua file's header gives the script's KEYS, ARGV, reply
// and complexity.
package lua

import (
	"crypto/sha1"
	"embed"
	"encoding/hex"
	"regexp"
	"strings"
)

//go:embed *.lua includes/*.lua
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

// include returns the text of one include, includes/<name>.lua.
func include(name string) string { return file("includes/" + name) }

// dependsLine is an include's declaration of the includes it uses itself,
// in its header: "-- includes: a b c".
var dependsLine = regexp.MustCompile(`(?m)^-- includes: (.*)$`)

// depends returns the includes that the include name declares it uses.
func depends(name string) []string {
	m := dependsLine.FindStringSubmatch(include(name))
	if m == nil {
		return nil
	}
	return strings.Fields(m[1])
}

// assemble returns the text of the includes named and of those they
// declare, each once, every include after the ones it uses; the order is
// that of a depth-first walk in the order declared, so it is stable. A
// cycle is a bug of the includes' headers, found by the first test that
// loads the package.
//
// done holds the includes already assembled for the same script, which
// are left out (nil: none).
func assemble(names []string, done map[string]bool) string {
	var b strings.Builder
	if done == nil {
		done = map[string]bool{}
	}
	walking := map[string]bool{}
	var walk func(n string)
	walk = func(n string) {
		if done[n] {
			return
		}
		if walking[n] {
			panic("scripts/lua: the includes' declarations form a cycle through " + n)
		}
		walking[n] = true
		for _, d := range depends(n) {
			walk(d)
		}
		walking[n] = false
		done[n] = true
		b.WriteString(include(n))
	}
	for _, n := range names {
		walk(n)
	}
	return b.String()
}

// Sharded returns a script source that announces wakeups with SPUBLISH
// (sharded pub/sub, Redis 7.0+) instead of PUBLISH. Inside a Cluster
// script, a shard channel is slot-checked like a key, so every channel a
// script publishes to carries the hash tag of the script's keys.
func Sharded(src string) string {
	// Every 'PUBLISH' literal: the publish include's redis.pcall('PUBLISH', ...),
	// and the command name its refusal reports (so the ACL hint says
	// +spublish).
	return strings.ReplaceAll(src, "'PUBLISH'", "'SPUBLISH'")
}

// library returns the function library of a script, and the name of the
// one function it registers: includes run once, when Redis loads the
// library, and the script's file becomes the body of a function that the
// registered function calls. KEYS and ARGV, which a script and its
// includes read as globals under EVAL, are locals of the library that
// each call sets before it runs the body: a function gets its keys and
// arguments as parameters, and a library may not define globals.
func library(name, includes, body string) (function, code string) {
	sum := sha1.Sum([]byte(includes + "\x00" + body))
	function = "timerq_" + name + "_" + hex.EncodeToString(sum[:6])
	var b strings.Builder
	b.WriteString("#!lua name=" + function + "\n")
	b.WriteString("local KEYS, ARGV\n")
	b.WriteString(includes)
	b.WriteString("local function main()\n")
	b.WriteString(body)
	b.WriteString("\nend\n")
	b.WriteString("redis.register_function('" + function + "', function(keys, args)\n")
	b.WriteString("  KEYS, ARGV = keys, args\n")
	b.WriteString("  return main()\n")
	b.WriteString("end)\n")
	return function, b.String()
}
