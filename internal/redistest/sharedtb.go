package redistest

import (
	"fmt"
	"os"
	"testing"
)

// sharedTB is the testing.TB of the shared Cluster: its servers belong to
// the test binary, not to one test, so their cleanups run in StopShared.
type sharedTB struct {
	testing.TB // nil: only the methods below are used
	cleanups   []func()
	dirs       []string
}

func (s *sharedTB) Helper()          {}
func (s *sharedTB) Cleanup(f func()) { s.cleanups = append(s.cleanups, f) }
func (s *sharedTB) TempDir() string {
	d, err := os.MkdirTemp("", "timerq-cluster-")
	if err != nil {
		panic(err)
	}
	s.dirs = append(s.dirs, d)
	return d
}
func (s *sharedTB) Fatalf(format string, args ...any) { panic(fmt.Sprintf(format, args...)) }
func (s *sharedTB) Skipf(format string, args ...any)  { panic(fmt.Sprintf(format, args...)) }

func (s *sharedTB) cleanup() {
	for i := len(s.cleanups) - 1; i >= 0; i-- {
		s.cleanups[i]()
	}
	for _, d := range s.dirs {
		_ = os.RemoveAll(d)
	}
}
