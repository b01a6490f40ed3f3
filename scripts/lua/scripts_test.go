package lua

import (
	"io/fs"
	"regexp"
	"strings"
	"testing"

	"github.com/timerq/timerq/internal/keyspace"
)

// called matches each command a script names: redis.call('X', redis.pcall('X',
// and the probes' and reads' {'X', ...} lists.
var called = regexp.MustCompile(`'([A-Z]+)'`)

func commands(src string) map[string]bool {
	m := map[string]bool{}
	for _, c := range called.FindAllStringSubmatch(src, -1) {
		m[strings.ToLower(c[1])] = true
	}
	return m
}

// TestTableCoversEveryFile: each .lua file is an entry of the table (the
// includes live in includes/), so no script is loaded from anywhere else.
func TestTableCoversEveryFile(t *testing.T) {
	names, err := fs.Glob(files, "*.lua")
	if err != nil {
		t.Fatal(err)
	}
	entries := map[string]bool{}
	for _, s := range All {
		if entries[s.Name] {
			t.Errorf("%s is in the table twice", s.Name)
		}
		entries[s.Name] = true
	}
	for _, n := range names {
		if !entries[strings.TrimSuffix(n, ".lua")] {
			t.Errorf("%s has no entry in the table (scripts.go)", n)
		}
	}
}

// TestTableEntries checks what the table can check without Redis: each
// command it lists is one the script's source names, each entry's keys
// share one hash tag, and the sharded flavour differs exactly where the
// script publishes. internal/aclright's TestEveryScriptNamesEveryRefusedRight
// checks on Redis that the commands are all the script needs.
func TestTableEntries(t *testing.T) {
	for _, s := range All {
		have := commands(s.Source)
		for _, c := range s.Commands {
			if !have[c] {
				t.Errorf("%s: the table lists %s, which neither the script nor its includes run", s.Name, c)
			}
		}
		for _, sp := range []keyspace.Space{keyspace.Shard("ns", 0, 1), keyspace.Shard("ns", 3, 4)} {
			keys := s.Keys(sp, "g")
			if len(keys) == 0 {
				t.Errorf("%s takes no keys", s.Name)
				continue
			}
			for _, k := range keys {
				if keyspace.Slot(k) != keyspace.Slot(keys[0]) {
					t.Errorf("%s: keys %s and %s are in different Cluster slots", s.Name, keys[0], k)
				}
			}
		}
		publishes := strings.Contains(file(s.Name), "publish(") || strings.Contains(file(s.Name), "wake_publish(")
		if publishes != s.Publishes {
			t.Errorf("%s: the table says Publishes is %v, its source says %v", s.Name, s.Publishes, publishes)
		}
		if (s.ShardedSource != s.Source) != s.Publishes {
			t.Errorf("%s: the sharded flavour differs from the classic one: %v, Publishes: %v", s.Name, s.ShardedSource != s.Source, s.Publishes)
		}
	}
}

// TestCheckCoversWorkers: queue.CheckPermissions runs check.lua to find a
// worker's missing right at start-up, so check.lua must run every command
// of every script the table marks as a worker's.
func TestCheckCoversWorkers(t *testing.T) {
	have := commands(file("check"))
	for _, s := range All {
		if !s.Worker {
			continue
		}
		for _, c := range s.Commands {
			if !have[c] {
				t.Errorf("check.lua does not check %s, which the worker's %s script runs", c, s.Name)
			}
		}
	}
}

// replyCode matches the code of each error reply a script builds itself.
var replyCode = regexp.MustCompile(`error_reply\('([A-Z_]+)`)

// TestErrorCodesHaveOnePrefix: a script's own error codes all start with
// TIMERQ_, so the Go side can match one family, and Redis's codes (ERR,
// NOPERM, WRONGTYPE) keep their meaning.
func TestErrorCodesHaveOnePrefix(t *testing.T) {
	names, err := fs.Glob(files, "*.lua")
	if err != nil {
		t.Fatal(err)
	}
	redisCodes := map[string]bool{"ERR": true, "NOPERM": true, "WRONGTYPE": true}
	for _, n := range names {
		for _, m := range replyCode.FindAllStringSubmatch(file(strings.TrimSuffix(n, ".lua")), -1) {
			if code := m[1]; !redisCodes[code] && !strings.HasPrefix(code, "TIMERQ_") {
				t.Errorf("%s replies the error code %s; name the script's own codes TIMERQ_<NAME>", n, code)
			}
		}
	}
}

// The scripts that compare due scores with the server's clock and write a
// fire time read TIME once: from two reads, the second may fall in the next
// millisecond, and a timer due in it would be written as fired a
// millisecond before its due time (includes/clock_due.lua).
func TestDueComparisonsReadTimeOnce(t *testing.T) {
	reads := regexp.MustCompile(`redis\.call\('TIME'\)|now_\w+\(\)`)
	for _, name := range []string{"claim", "hold", "stats", "horizon"} {
		if n := len(reads.FindAllString(file(name), -1)); n != 1 {
			t.Errorf("%s.lua reads TIME %d times, want once", name, n)
		}
	}
}
