package cliconf_test

import (
	"context"
	"net"
	"strings"
	"testing"

	"github.com/timerq/timerq/internal/redistest"
)

// TestSentinelURLMasterPassword: in a Sentinel URL, go-redis gives
// user:password@ to the Sentinels, not to the master. An operator who puts
// the master's password there is told where it goes instead, and the URL
// the hint shows works.
func TestSentinelURLMasterPassword(t *testing.T) {
	master := redistest.Start(t, redistest.Config{})
	_, mport, _ := net.SplitHostPort(master.Addr())
	sentinel := redistest.Start(t, redistest.Config{Sentinel: true})
	sc := sentinel.Client(t)
	ctx := context.Background()
	// Set after start: redistest's start-up PING has no password.
	if err := master.Client(t).ConfigSet(ctx, "requirepass", "s3cret").Err(); err != nil {
		t.Fatal(err)
	}
	for _, cmd := range [][]any{
		{"SENTINEL", "MONITOR", "m", "127.0.0.1", mport, 1},
		{"SENTINEL", "SET", "m", "auth-pass", "s3cret"},
	} {
		if err := sc.Do(ctx, cmd...).Err(); err != nil {
			t.Fatalf("%v: %v", cmd, err)
		}
	}
	ns := redistest.Namespace(t)

	code, stderr := timerctl("--redis", "redis://:s3cret@"+sentinel.Addr()+"/0?master_name=m", "-n", ns, "schedule", "a", "--in", "1h")
	if code != 1 || !strings.Contains(stderr, "user:password@ is for the Sentinels") || !strings.Contains(stderr, "&password=PASS") {
		t.Errorf("master password in userinfo: exit %d %q, want 1 and a hint to use &password=", code, stderr)
	}
	if strings.Contains(stderr, "s3cret") {
		t.Errorf("the hint shows the password: %q", stderr)
	}

	code, stderr = timerctl("--redis", "redis://"+sentinel.Addr()+"/0?master_name=m&password=s3cret", "-n", ns, "schedule", "a", "--in", "1h")
	if code != 0 {
		t.Fatalf("master password as &password=: exit %d %q, want 0", code, stderr)
	}
	code, stderr = timerctl("--redis", "redis://"+sentinel.Addr()+"/0?master_name=m&password=s3cret", "-n", ns, "get", "a")
	if code != 0 {
		t.Errorf("get through the Sentinel URL: exit %d %q, want 0: the timer is on the master", code, stderr)
	}
}
