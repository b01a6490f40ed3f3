package redistest

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// TestStartRefusesAServerThatIsNotItsOwn: when another process took the
// port between freePort and the bind, the server that answers PING is
// that other one; start must not take it for its own (it returns an
// error, and Start tries another port), as a Cluster test once sent
// CLUSTER MYID to another test's plain server.
func TestStartRefusesAServerThatIsNotItsOwn(t *testing.T) {
	other := Start(t, Config{})
	s := &Server{t: t, bin: Require(t), dir: t.TempDir(), bind: other.bind, port: other.port}
	s.args = []string{"--port", fmt.Sprint(s.port), "--bind", s.bind, "--dir", s.dir,
		"--save", "", "--appendonly", "no", "--logfile", filepath.Join(s.dir, "redis.log")}
	err := s.start()
	if err == nil {
		s.stop()
		t.Fatalf("start on %s, whose port another server holds, returned that server as its own", other.Addr())
	}
	if !strings.Contains(err.Error(), "exited") {
		t.Errorf("start = %v; want the new server's exit (it could not bind)", err)
	}
}
