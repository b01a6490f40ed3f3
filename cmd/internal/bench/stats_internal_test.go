package bench

import (
	"bytes"
	"encoding/json"
	"testing"
)

// TestPerOpUsOfNoOperations: a phase in which no operation completed (a
// short --api-duration on a loaded machine, every request still in flight
// when it ends) used CPU over zero creates. The per-create figures must
// read 0, not +Inf, so that the result is still valid JSON.
func TestPerOpUsOfNoOperations(t *testing.T) {
	if got := perOpUs(0.5, 1000); got != 500 {
		t.Fatalf("perOpUs(0.5 s, 1000) = %v, want 500", got)
	}
	res := &APIResult{Common: Common{Scenario: "api"},
		APICPUUs: perOpUs(0.02, 0), RedisCPUUs: perOpUs(0.01, 0),
		GoCPUUs: perOpUs(0.03, 0), RedisGoCPUUs: perOpUs(0, 0)}
	var buf bytes.Buffer
	if err := Write(&buf, res, true); err != nil {
		t.Fatalf("Write of an api result with no creates: %v", err)
	}
	var r map[string]any
	if err := json.Unmarshal(buf.Bytes(), &r); err != nil {
		t.Fatalf("%q is not a JSON object: %v", buf.String(), err)
	}
	for _, f := range []string{"api_cpu_us_per_create", "redis_cpu_us_per_create", "go_cpu_us_per_create", "redis_cpu_us_per_go_create"} {
		if r[f] != float64(0) {
			t.Errorf("%s = %v, want 0", f, r[f])
		}
	}
}
