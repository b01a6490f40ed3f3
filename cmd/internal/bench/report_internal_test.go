package bench

import (
	"bytes"
	"strings"
	"testing"
)

// TestWriteOptionalPart checks that a steady result without --deliver
// prints no delivery field, in JSON or as a table (the output of the runs
// before the option), and one with it prints them in both.
func TestWriteOptionalPart(t *testing.T) {
	for _, asJSON := range []bool{true, false} {
		var off, on bytes.Buffer
		if err := Write(&off, &SteadyResult{Timers: 3}, asJSON); err != nil {
			t.Fatal(err)
		}
		if err := Write(&on, &SteadyResult{Timers: 3, Delivered: &Delivered{Deliveries: 3}}, asJSON); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(off.String(), "deliver") || !strings.Contains(off.String(), "timers") {
			t.Errorf("json %v, without --deliver: %s", asJSON, off.String())
		}
		for _, f := range []string{"deliveries", "delivery_lateness_p99_ms", "delivery_duplicates", "delivery_lost"} {
			if !strings.Contains(on.String(), f) {
				t.Errorf("json %v, with --deliver: no %s in %s", asJSON, f, on.String())
			}
		}
	}
}
