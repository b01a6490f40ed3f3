package queue

import (
	"strconv"
	"time"
)

// plan is what to arm for one schedule.
type plan struct {
	arms  []Occurrence
	last  time.Time // the last nominal time armed or skipped; zero if none
	ended bool
}

// planFrom computes the occurrences to arm after base so that want of them
// are pending in the future, given count already armed, applying the
// catch-up policy to those due at or before now.
func planFrom(r Recurring, base, now time.Time, count int64, want int) (plan, error) {
	sch, err := r.Schedule()
	if err != nil {
		return plan{}, err
	}
	var p plan
	var missed []time.Time
	keepMissed := 1
	switch r.CatchUp {
	case CatchUpSkip:
		keepMissed = 0
	case CatchUpAll:
		keepMissed = r.CatchUpLimit
	}
	future := 0
	t := base
	for scanned := 0; future < want; {
		n := sch.Next(t)
		if n.IsZero() || (!r.End.IsZero() && n.After(r.End)) || ValidateDue(n) != nil {
			p.ended = true
			break
		}
		t = n
		if !n.After(now) {
			p.last = n
			if keepMissed > 0 {
				missed = append(missed, n)
				if len(missed) > keepMissed {
					missed = missed[1:]
				}
			}
			if scanned++; scanned >= maxMissedScan {
				t = now // skip the rest unexamined
			}
			continue
		}
		// Missed ones are armed before future ones, oldest first.
		if len(missed) > 0 {
			p.arms, missed = append(p.arms, occurrences(r, missed)...), nil
		}
		p.arms = append(p.arms, occurrence(r, n))
		p.last = n
		future++
	}
	if len(missed) > 0 {
		p.arms = append(p.arms, occurrences(r, missed)...)
	}
	if r.MaxCount > 0 && count+int64(len(p.arms)) >= r.MaxCount {
		p.arms = p.arms[:max(r.MaxCount-count, 0)]
		if len(p.arms) > 0 {
			p.last = p.arms[len(p.arms)-1].Nominal
		}
		p.ended = true
	}
	return p, nil
}

func occurrences(r Recurring, ts []time.Time) []Occurrence {
	out := make([]Occurrence, len(ts))
	for i, t := range ts {
		out[i] = occurrence(r, t)
	}
	return out
}

func occurrence(r Recurring, nominal time.Time) Occurrence {
	nominal = nominal.Truncate(time.Millisecond).UTC()
	return Occurrence{ID: OccurrenceID(r.ID, nominal), Nominal: nominal, Due: nominal.Add(JitterOf(r.ID, nominal, r.Jitter))}
}

func lastArg(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return strconv.FormatInt(t.UnixMilli(), 10)
}

// stateCode is the state a plan leaves an active schedule in.
func stateCode(ended bool) recState {
	if ended {
		return recEnded
	}
	return recActive
}
