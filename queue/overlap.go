package queue

import (
	"fmt"
)

// Overlap is a schedule's overlap policy: whether Consume hands a consumer
// group one of the schedule's occurrences while the group still has
// another one of them unacknowledged. It is per group: each group applies
// it to its own deliveries.
type Overlap string

// Overlap policies.
const (
	// OverlapAllow hands every occurrence over as it fires, like any fire
	// event (the default).
	OverlapAllow Overlap = "allow"
	// OverlapSkip does not hand an occurrence to the group's handler while
	// the group has another occurrence of the schedule pending (delivered
	// and not acknowledged: its handler still runs, it failed and waits
	// for its retry, or its consumer died and it waits to be reclaimed).
	// The skipped occurrence is acknowledged instead, counted in
	// Counters.OverlapSkipped and reported to ConsumeOptions.OnSkip; it is
	// not dead-lettered, since nothing failed. The next occurrence after the
	// pending one is acknowledged is handed over as usual.
	OverlapSkip Overlap = "skip"
)

func (o Overlap) normalize() (Overlap, error) {
	switch o {
	case "":
		return OverlapAllow, nil
	case OverlapAllow, OverlapSkip:
		return o, nil
	}
	return o, fmt.Errorf("overlap policy %q is not one of allow, skip", string(o))
}

// Skip is an occurrence that Consume acknowledged without handing it to the
// handler, because its schedule's Overlap is OverlapSkip and the group had
// another occurrence of the schedule pending.
type Skip struct {
	// Event is the skipped occurrence's fire event.
	Event Event
	// Schedule is its schedule's ID.
	Schedule string
	// Pending is the stream entry ID of the occurrence still pending in the
	// group, because of which this one was skipped.
	Pending string
}
