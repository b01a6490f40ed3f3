package keyspace

// Bulk cancels (queue.CancelMatching) keep a job record in the namespace's
// slot and their progress in each shard's, so that the script that cancels
// a batch of a shard (scripts/lua/cancel_batch.lua) advances the shard's
// scan cursor and counts in the same atomic step.

// CancelJobs is the sorted set of the namespace's bulk cancel jobs still
// retained: member = job ID, score = the job's creation time in ms.
func (ns Namespace) CancelJobs() string { return ns.key("cancel-jobs") }

// CancelRunning is the sorted set of the bulk cancel jobs by ID prefix
// alone not yet finished, which workers look for: member = job ID, score =
// creation ms.
func (ns Namespace) CancelRunning() string { return ns.key("cancel-running") }

// CancelRunningFiltered is CancelRunning for the jobs whose filter has an
// owner or labels. They are kept apart because a worker that predates
// owners reads only a job's ID prefix: it would run such a job as a cancel
// of every timer of its prefix, or of every timer when it has none. Only
// workers that know the whole filter look here.
func (ns Namespace) CancelRunningFiltered() string { return ns.key("cancel-running-filtered") }

// CancelJob is the hash of bulk cancel job id: its filter, state and
// times, and, once finished, its totals (queue.CancelJob).
func (ns Namespace) CancelJob(id string) string { return ns.key("cancel-job:" + id) }

// CancelLease is the string a worker sets (SET NX PX) while it runs bulk
// cancel job id: its random token, expiring unless renewed.
func (ns Namespace) CancelLease(id string) string { return ns.key("cancel-lease:" + id) }

// CancelProgress is the hash of bulk cancel job id's progress on this
// shard: its HSCAN cursor over the shard's timers and its counts
// (scripts/lua/cancel_batch.lua).
func (s Space) CancelProgress(id string) string { return s.tag + "cancel-progress:" + id }

// GlobEscape escapes the glob characters of s (* ? [ ] \) for a
// KEYS/SCAN/HSCAN MATCH pattern, so that the pattern matches s literally.
func GlobEscape(s string) string {
	esc := make([]byte, 0, len(s)+2)
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '*', '?', '[', ']', '\\':
			esc = append(esc, '\\', c)
		default:
			esc = append(esc, c)
		}
	}
	return string(esc)
}
