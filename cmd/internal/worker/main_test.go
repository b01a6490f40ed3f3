package worker

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/timerq/timerq/internal/redistest"
)

// TestMain checks that Run leaves no goroutine behind: not its pollers,
// nor its metrics and API servers, nor the SIGHUP loop.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(redistest.Shared(m),
		// The test clients' keep-alive connections end asynchronously
		// after CloseIdleConnections.
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
	)
}
