package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// worker is the timerworker binary the package's tests share: one go build
// instead of one per test. TestSmoke still leaves --worker-bin empty, so
// that timerbench's own build of it stays under test.
//
// The tests stay sequential: urfave/cli/v2 keeps its help flag and command
// in package variables that App.Run writes, so two apps running at once in
// one process are a data race (-race caught TestChaos beside
// TestClusterSmoke).
var worker struct {
	once     sync.Once
	dir, bin string
	err      error
}

// workerBin builds cmd/timerworker once and returns its path.
func workerBin(t *testing.T) string {
	t.Helper()
	worker.once.Do(func() {
		if worker.dir, worker.err = os.MkdirTemp("", "timerbench-test-"); worker.err != nil {
			return
		}
		worker.bin = filepath.Join(worker.dir, "timerworker")
		if b, err := exec.Command("go", "build", "-o", worker.bin, "github.com/timerq/timerq/cmd/timerworker").CombinedOutput(); err != nil {
			worker.err = fmt.Errorf("%v\n%s", err, b)
		}
	})
	if worker.err != nil {
		t.Fatalf("go build timerworker: %v", worker.err)
	}
	return worker.bin
}

func TestMain(m *testing.M) {
	code := m.Run()
	if worker.dir != "" {
		_ = os.RemoveAll(worker.dir)
	}
	os.Exit(code)
}
