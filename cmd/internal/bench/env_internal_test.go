package bench

import (
	"context"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/timerq/timerq/internal/redistest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestLaunchRedisRefusesAForeignServer: when another Redis answers on the
// port while the process timerbench started is not the one listening (as
// after a crash, when something else took the port), launchRedis refuses
// it, naming both pids, and stops its own process, rather than taking the
// stranger's PONG for its restarted server.
func TestLaunchRedisRefusesAForeignServer(t *testing.T) {
	t.Parallel()
	foreign := redistest.Start(t, redistest.Config{})
	pid, err := serverPID(context.Background(), foreign.Client(t))
	if err != nil {
		t.Fatal(err)
	}
	// A process of its own that never listens stands in for a
	// redis-server that cannot bind the taken port.
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("no sleep binary")
	}
	e := &Env{cfg: Config{Log: io.Discard}, url: "redis://" + foreign.Addr() + "/0",
		serverPath: sleep, serverArgs: []string{"60"}, tmpDir: t.TempDir()}
	err = e.launchRedis(context.Background())
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("is pid %d, not the redis-server pid %d", pid, e.server.Process.Pid)) {
		t.Fatalf("launchRedis with a foreign server on the port = %v; want a refusal naming pid %d", err, pid)
	}
	select {
	case <-e.exited:
	default:
		t.Fatal("launchRedis left its own process running")
	}
}

// TestRecurringRefusesAWindowThatMeasuresNothing: the recurring scenario
// measures the occurrences due in its window but the last settleWindow;
// a window no longer than that measured nothing and divided by it, which
// printed a fire rate of +Inf or NaN. It is refused before anything runs,
// naming the flag.
func TestRecurringRefusesAWindowThatMeasuresNothing(t *testing.T) {
	t.Parallel()
	e := &Env{cfg: Config{Log: io.Discard}}
	for _, d := range []time.Duration{time.Second, settleWindow} {
		_, err := e.Recurring(context.Background(), RecurringConfig{Duration: d})
		if err == nil || !strings.Contains(err.Error(), "--recurring-duration") {
			t.Errorf("Recurring with a %v window = %v, want a refusal naming --recurring-duration", d, err)
		}
	}
}
