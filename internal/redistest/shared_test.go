package redistest

import (
	"context"
	"strings"
	"syscall"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(Shared(m)) }

// TestSharedServer: every caller gets the one server, no test can take it
// down, and StopShared stops its process; the next caller starts another.
func TestSharedServer(t *testing.T) {
	s := SharedServer(t)
	if again := SharedServer(t); again != s {
		t.Fatal("SharedServer started a second server")
	}
	if err := s.Client(t).Ping(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	for name, op := range map[string]func(){"Kill9": s.Kill9, "Stop": s.Stop, "Restart": s.Restart} {
		func() {
			defer func() {
				if r := recover(); r == nil || !strings.Contains(r.(string), "ForEachPrivate") {
					t.Errorf("%s of the shared server: recovered %v, want a panic naming ForEachPrivate", name, r)
				}
			}()
			op()
		}()
	}
	pid := s.cmd.Process.Pid
	StopShared()
	if err := syscall.Kill(pid, 0); err == nil {
		t.Fatalf("redis-server %d still runs after StopShared", pid)
	}
	next := SharedServer(t)
	if next == s || next.cmd.Process.Pid == pid {
		t.Fatal("SharedServer after StopShared returned the stopped server")
	}
}

// TestForEachPrivateOwnsItsServer: the real arm of ForEachPrivate runs on a
// server of its own, which the test may stop.
func TestForEachPrivateOwnsItsServer(t *testing.T) {
	ForEachPrivate(t, func(t *testing.T, b *Backend) {
		if b.Real == nil {
			return
		}
		if b.Real == SharedServer(t) {
			t.Fatal("ForEachPrivate ran on the shared server")
		}
		b.Real.Stop()
	})
}
