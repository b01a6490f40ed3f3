package queue

import "os"

// TIMERQ_TEST_LAYOUT=2 runs the package's tests with every namespace
// upgraded to layout 2 when a Queue first uses it (upgradeOnFirstUse), so
// that the behavioural suite holds for both layouts; .ci/run runs it so.
func init() {
	upgradeOnFirstUse = os.Getenv("TIMERQ_TEST_LAYOUT") == "2"
}
