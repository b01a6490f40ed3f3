package ui

import (
	"strings"
	"testing"
	"time"

	"github.com/timerq/timerq/queue"
)

// TestConsumerStatus: where Redis reports read attempts (7.2+), a consumer
// unseen for over consumerStale is called stopped; where it reports only
// deliveries (7.0), only one that holds deliveries past ClaimIdle is, and a
// quiet one is called undecidable rather than dead.
func TestConsumerStatus(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range []struct {
		c     queue.ConsumerInfo
		stale bool
		says  string
	}{
		{queue.ConsumerInfo{Idle: time.Second, Inactive: time.Hour, InactiveKnown: true}, false, "reading"},
		{queue.ConsumerInfo{Idle: 2 * time.Minute, Inactive: time.Hour, InactiveKnown: true}, true, "stopped or dead: no read for 2m"},
		{queue.ConsumerInfo{Idle: time.Second}, false, "active"},
		{queue.ConsumerInfo{Idle: 2 * time.Minute}, false, "cannot tell"},
		{queue.ConsumerInfo{Idle: 2 * time.Minute, Pending: 3}, true, "holds 3 deliveries untouched for 2m"},
		{queue.ConsumerInfo{Idle: -time.Millisecond}, false, "unknown"},
	} {
		v := consumerViews([]queue.ConsumerInfo{tc.c}, now)[0]
		if v.Stale != tc.stale || !strings.Contains(v.Status, tc.says) {
			t.Errorf("%+v: stale %v, %q; want %v, saying %q", tc.c, v.Stale, v.Status, tc.stale, tc.says)
		}
		if tc.c.Idle >= 0 && !v.LastSeen.Equal(now.Add(-tc.c.Idle)) {
			t.Errorf("%+v: last seen %v", tc.c, v.LastSeen)
		}
		if tc.c.InactiveKnown && !v.LastDelivery.Equal(now.Add(-tc.c.Inactive)) {
			t.Errorf("%+v: last delivery %v", tc.c, v.LastDelivery)
		}
	}
	if got := streamTime("1767323045123-4"); !got.Equal(time.UnixMilli(1767323045123)) {
		t.Errorf("streamTime = %v", got)
	}
	if !streamTime("0-0").IsZero() || !streamTime("").IsZero() {
		t.Error("streamTime of no entry is not zero")
	}
}
