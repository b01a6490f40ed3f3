package main

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

	"github.com/timerq/timerq/cmd/internal/bench"
	"github.com/timerq/timerq/internal/redistest"
)

// TestSteadyTraceSmoke runs steady --trace with tiny sizes: the workers
// and the bench export their spans to the bench's sink (at least one fire
// span per timer arrives), and correctness is unchanged. Never speed.
func TestSteadyTraceSmoke(t *testing.T) {
	srv := redistest.Start(t, redistest.Config{})
	var stdout, stderr bytes.Buffer
	args := []string{"timerbench", "steady", "--json", "--trace", "--worker-bin", workerBin(t), "--redis", srv.URL(), "--workers", "2",
		"--rate", "300", "--duration", "1s", "--steady-lead", "1s", "--wake-every", "10"}
	if err := newApp(&stdout, &stderr).RunContext(context.Background(), args); err != nil {
		t.Fatalf("timerbench steady --trace: %v\n%s", err, stderr.String())
	}
	var r bench.SteadyResult
	if err := json.Unmarshal(stdout.Bytes(), &r); err != nil {
		t.Fatalf("output %q is not the result: %v", stdout.String(), err)
	}
	if !r.Traced || r.SpansExported < int64(r.Timers) {
		t.Fatalf("traced %v, %d spans exported for %d timers; want at least one fire span per timer", r.Traced, r.SpansExported, r.Timers)
	}
	if r.FiredEarly != 0 || r.Duplicates != 0 || r.Lost != 0 || r.Timers != 300 {
		t.Fatalf("early %d, duplicates %d, lost %d of %d", r.FiredEarly, r.Duplicates, r.Lost, r.Timers)
	}
}
