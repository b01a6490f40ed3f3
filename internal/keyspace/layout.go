package keyspace

import "strconv"

// Layout is the newest layout of a shard's keys that this build reads and
// writes: the key names, types and record format docs/redis-layout.md
// describes. It runs every shard of layout 1 or 2, each as it finds it,
// and upgrade.lua moves a shard from 1 to 2.
const Layout = 2

// LayoutMarker is the value a later layout leaves in place of a key it
// retires: a string starting "timerq-layout <n>", n being that layout
// (docs/redis-layout.md, "Layout versions"). Every script's type check
// (scripts/lua/includes/layout_marker.lua) refuses a marker with
// TIMERQ_LAYOUT instead of writing the old key back, so a build that
// predates layout n stops with an error naming the fix (queue.ErrLayout)
// rather than writing a timer nobody fires.
func LayoutMarker(layout int) string {
	return "timerq-layout " + strconv.Itoa(layout) + ": retired by a newer timerq; upgrade every binary of this namespace, and do not delete this key"
}
