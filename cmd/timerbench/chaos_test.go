package main

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

	"github.com/timerq/timerq/internal/redistest"
)

// runChaos runs timerbench chaos with a small load and the given extra
// flags, and returns its JSON object.
func runChaos(t *testing.T, workerBin string, extra ...string) map[string]float64 {
	t.Helper()
	var stdout, stderr bytes.Buffer
	args := append([]string{"timerbench", "chaos", "--json", "--quiet", "--redis-server", redistest.Require(t),
		"--worker-bin", workerBin, "--workers", "3", "--timers", "2000", "--window", "4s", "--lead", "1s",
		"--kill-every", "1s", "--redis-crashes", "1"}, extra...)
	if err := newApp(&stdout, &stderr).RunContext(context.Background(), args); err != nil {
		t.Fatalf("timerbench chaos: %v\n%s", err, stderr.String())
	}
	var r map[string]any
	if err := json.Unmarshal(stdout.Bytes(), &r); err != nil {
		t.Fatalf("output %q is not one JSON object: %v", stdout.String(), err)
	}
	out := make(map[string]float64)
	for _, f := range []string{"timers", "fired", "lost", "duplicates", "fired_early", "vanished", "mismatches",
		"wake_duplicates", "worker_kills", "worker_restarts", "redis_crashes", "lateness_p99_ms", "lateness_max_ms", "shards"} {
		v, ok := r[f].(float64)
		if !ok {
			t.Fatalf("no numeric field %q in %s", f, stdout.String())
		}
		out[f] = v
	}
	t.Logf("%s", stdout.String())
	return out
}

// TestChaos kills a timerworker every second and redis-server once while
// 2,000 timers come due, with the AOF at appendfsync always: every
// acknowledged timer must fire exactly once, never early, with its payload.
// Redis crashes alone must find the workers reconnecting by themselves,
// and fire the same way: once, never early, nothing vanished.
// Then it runs the first chaos without an AOF, where the crash must show as
// lost fires, so that the zeros above cannot come from a check that sees
// nothing.
func TestChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("chaos starts processes and takes ~30 s")
	}
	redistest.Require(t)
	bin := workerBin(t)

	r := runChaos(t, bin)
	for _, f := range []string{"lost", "duplicates", "fired_early", "vanished", "mismatches", "wake_duplicates"} {
		if r[f] != 0 {
			t.Errorf("%s = %v, want 0", f, r[f])
		}
	}
	if r["timers"] != 2000 || r["fired"] != 2000 {
		t.Errorf("timers %v fired %v, want 2000 and 2000", r["timers"], r["fired"])
	}
	if r["worker_kills"] < 1 || r["redis_crashes"] != 1 {
		t.Errorf("worker_kills %v redis_crashes %v: the chaos did not happen", r["worker_kills"], r["redis_crashes"])
	}

	// Without worker kills, the same workers must reconnect by themselves
	// after each restart of Redis and fire everything.
	calm := runChaos(t, bin, "--kill-every", "0", "--redis-crashes", "2", "--timers", "1000", "--window", "3s")
	for _, f := range []string{"duplicates", "vanished", "fired_early", "mismatches", "wake_duplicates"} {
		if calm[f] != 0 {
			t.Errorf("Redis crashes alone: %s = %v, want 0", f, calm[f])
		}
	}
	if calm["fired"] != 1000 || calm["lost"] != 0 || calm["redis_crashes"] != 2 || calm["worker_kills"] != 0 || calm["worker_restarts"] != 0 {
		t.Errorf("Redis crashes alone: %v; want all 1,000 fired by the workers that were there from the start", calm)
	}

	broken := runChaos(t, bin, "--appendfsync", "off", "--settle", "3s")
	if broken["lost"] == 0 || broken["vanished"] == 0 {
		t.Errorf("without an AOF a crash must lose fires, yet lost = %v and vanished = %v: the counting sees nothing",
			broken["lost"], broken["vanished"])
	}
}

// TestChaosShardedWorkerKills kills one of 4 timerworkers every 500 ms
// while 2,000 timers come due on a 16-shard namespace, whose shards the
// workers share by membership: every timer fires exactly once, never early,
// and (a liveness check, not a speed target) within 5 s of its due time,
// though each killed worker keeps its shards until its membership lapses.
// The poller's own tests (TestNonOwnerClaimsOverdueShard,
// TestChaosWorkerCrashesOnShardedNamespace) are the ones that fail when the
// takeover of overdue shards is off; here the lapse alone keeps most
// timers under 5 s.
func TestChaosShardedWorkerKills(t *testing.T) {
	if testing.Short() {
		t.Skip("chaos starts processes and takes ~10 s")
	}
	redistest.Require(t)
	bin := workerBin(t)
	r := runChaos(t, bin, "--shards", "16", "--workers", "4", "--kill-every", "500ms", "--redis-crashes", "0")
	for _, f := range []string{"lost", "duplicates", "fired_early", "vanished", "mismatches", "wake_duplicates"} {
		if r[f] != 0 {
			t.Errorf("%s = %v, want 0", f, r[f])
		}
	}
	if r["shards"] != 16 || r["timers"] != 2000 || r["fired"] != 2000 {
		t.Errorf("shards %v timers %v fired %v, want 16, 2000 and 2000", r["shards"], r["timers"], r["fired"])
	}
	if r["worker_kills"] < 4 {
		t.Errorf("worker_kills %v: the chaos did not happen", r["worker_kills"])
	}
	if r["lateness_max_ms"] > 5000 {
		t.Errorf("a timer fired %v ms late; every one should fire within 5 s", r["lateness_max_ms"])
	}
}
