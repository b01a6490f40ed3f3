package redistest

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
)

// sharedMain is set while a test binary runs its tests through Shared,
// which stops the shared servers afterwards.
var sharedMain atomic.Bool

// TestingM runs a test binary's tests, then stops the servers they shared.
// It satisfies goleak.TestingM.
type TestingM struct{ m *testing.M }

// Shared wraps m for a TestMain whose tests use SharedServer or
// SharedCluster (ForEach and ForEachAll do):
//
//	func TestMain(m *testing.M) { goleak.VerifyTestMain(redistest.Shared(m)) }
//
// Run stops the shared servers before goleak looks for leftover
// goroutines, so their reapers do not count as leaks.
func Shared(m *testing.M) TestingM { return TestingM{m} }

// Run runs the tests and stops the shared servers.
func (r TestingM) Run() int {
	sharedMain.Store(true)
	defer StopShared()
	return r.m.Run()
}

// sharedSet is one lazily started set of servers owned by the test binary.
type sharedSet struct {
	sync.Mutex
	t   *sharedTB
	err error
}

// start runs launch once, on a testing.TB that belongs to the binary; its
// failure fails every test that asks, not only the first. The caller holds
// the lock.
func (s *sharedSet) start(t testing.TB, launch func(testing.TB)) {
	t.Helper()
	if !sharedMain.Load() {
		t.Fatalf("redistest: a shared server needs the package's TestMain to run its tests through redistest.Shared(m), which stops it; or use ForEachPrivate")
	}
	if s.t == nil && s.err == nil {
		s.t = &sharedTB{}
		func() {
			defer func() {
				if r := recover(); r != nil { // sharedTB.Fatalf
					s.err = fmt.Errorf("%v", r)
				}
			}()
			launch(s.t)
		}()
	}
	if s.err != nil {
		t.Fatalf("redistest: shared server: %v", s.err)
	}
}

// stop runs the set's cleanups, then forget under the lock.
func (s *sharedSet) stop(forget func()) {
	s.Lock()
	defer s.Unlock()
	if s.t != nil {
		s.t.cleanup()
	}
	s.t, s.err = nil, nil
	forget()
}

var (
	sharedServer struct {
		sharedSet
		s *Server
	}
	sharedCluster struct {
		sharedSet
		c *Cluster
	}
)

// SharedServer returns the redis-server shared by every test of the
// binary, started on first use and stopped when the tests run through
// Shared end. A test on it keeps to its own namespace (Namespace), leaves
// the server's configuration alone and reads no server-wide state; Stop,
// Kill9 and Restart panic.
func SharedServer(t testing.TB) *Server {
	t.Helper()
	Require(t)
	sharedServer.Lock()
	defer sharedServer.Unlock()
	sharedServer.start(t, func(tb testing.TB) {
		sharedServer.s = Start(tb, Config{})
		sharedServer.s.shared = true
	})
	return sharedServer.s
}

// StopShared stops the shared server and Cluster, if they were started.
// TestingM.Run calls it.
func StopShared() {
	sharedServer.stop(func() { sharedServer.s = nil })
	sharedCluster.stop(func() { sharedCluster.c = nil })
}
