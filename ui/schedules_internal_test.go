package ui

import (
	"slices"
	"testing"
	"time"

	"github.com/timerq/timerq/queue"
)

// TestPastNominals: the recent occurrences counted back from the last armed
// one match the spec walked forward, for a cron spec (whose window widens
// from a minute to days) and an interval, and stop at the lower bound.
func TestPastNominals(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Skip("no tz database:", err)
	}
	created := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	last := time.Date(2026, 3, 30, 1, 30, 0, 0, time.UTC) // past the DST change of 29 March
	for _, r := range []queue.Recurring{
		{ID: "daily", Spec: "30 2 * * *", Location: berlin},
		{ID: "fast", Spec: "*/10 * * * * *"},
		{ID: "every", Every: 7 * time.Hour, Anchor: created},
	} {
		sch, err := r.Schedule()
		if err != nil {
			t.Fatal(err)
		}
		var all []time.Time
		for tm := created; ; {
			if tm = sch.Next(tm); tm.After(last) {
				break
			}
			all = append(all, tm.UTC())
		}
		slices.Reverse(all)
		got := pastNominals(r, created, last, 30)
		if want := all[:min(30, len(all))]; !slices.EqualFunc(got, want, time.Time.Equal) {
			t.Errorf("%s: got %v\nwant %v", r.ID, got, want)
		}
		// A lower bound cuts them off.
		lower := all[3]
		if got := pastNominals(r, lower, last, 30); !slices.EqualFunc(got, all[:3], time.Time.Equal) {
			t.Errorf("%s above %v: got %v, want %v", r.ID, lower, got, all[:3])
		}
	}
	if got := pastNominals(queue.Recurring{Every: time.Hour}, created, time.Time{}, 5); got != nil {
		t.Errorf("nothing armed yet: got %v", got)
	}
}
