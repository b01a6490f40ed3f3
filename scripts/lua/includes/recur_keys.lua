-- recur_keys (include): the recurring-schedule scripts' last four keys, by
-- name.
--
-- The recurring-schedule scripts (recur_load, recur_arm, recur_put) take one
-- shard's keys, in check_types' order, and four more last, with the same
-- hash tag:
-- the shard's timer meta hash, owner index and owners' epochs (keyspace
-- TimerMeta, Owners, Epochs: an occurrence of a schedule with an owner or
-- labels has them, written by the meta include), its deliveries and
-- endpoint names (keyspace Deliveries and EndpointNames), then the
-- schedules of that shard, whose occurrences live in it too. They are
-- addressed from the end, so that the timer keys may grow:
--   META_KEY, OWNERS_KEY, EPOCHS_KEY = KEYS[#KEYS-6], KEYS[#KEYS-5], KEYS[#KEYS-4]
--   DELIVER_KEY   = KEYS[#KEYS-3] deliver  HASH  occurrence id -> endpoint name,
--                      for the occurrences of a schedule that delivers
--   ENDPOINTS_KEY = KEYS[#KEYS-2] the endpoint names a schedule may deliver to
--   SCHED_KEY = KEYS[#KEYS-1] schedules  HASH  schedule id -> record (below)
--   SDUE_KEY  = KEYS[#KEYS]   sched-due  ZSET  schedule id -> due ms of its earliest pending
--                      occurrence: once that is well past, the occurrence
--                      fired without its successor being armed, and the
--                      repair pass tops the schedule up. Active schedules only.
--
-- A schedule record's codec is the includes sdecode and sencode, which
-- overlap.lua shares. An occurrence is an ordinary timer with ID
-- "<schedule id>@<nominal ms>".

--
-- recur_keys names them from the call's KEYS, and each of those scripts
-- calls it first: a function, not a top-level assignment, because a
-- function library (scripts.go: Library) runs its includes once, at load,
-- when there are no KEYS.

local SCHED_KEY, SDUE_KEY, DELIVER_KEY, ENDPOINTS_KEY, META_KEY, OWNERS_KEY, EPOCHS_KEY

local function recur_keys()
  SCHED_KEY, SDUE_KEY = KEYS[#KEYS - 1], KEYS[#KEYS]
  DELIVER_KEY, ENDPOINTS_KEY = KEYS[#KEYS - 3], KEYS[#KEYS - 2]
  META_KEY, OWNERS_KEY, EPOCHS_KEY = KEYS[#KEYS - 6], KEYS[#KEYS - 5], KEYS[#KEYS - 4]
end
