-- check_types (include): check the types of the seven keys of a shard
-- (KEYS[1..7]).
-- includes: check_type
--
-- Every script's keys share one hash tag, so that a script never crosses a
-- Cluster slot. Most scripts receive the same seven keys of one shard
-- (the others say which keys they take; the helpers that use KEYS[1..7]
-- are for the seven):
--   KEYS[1] due        ZSET  id -> due_ms, scheduled timers only
--   KEYS[2] timers     HASH  id -> record (see encode below)
--   KEYS[3] fired      ZSET  id -> due_ms, fired timers awaiting purge
--   KEYS[4] cancelled  ZSET  id -> due_ms, cancelled timers awaiting purge
--   KEYS[5] expire     ZSET  id -> purge_at_ms, settled timers with a retention
--   KEYS[6] fires      STREAM one entry per fired timer
--   KEYS[7] counters   HASH  totals recorded by claim.lua, never purged:
--                      fired (timers fired), late_sum_ms (their summed
--                      lateness) and late_le_<ms> / late_le_inf (how many
--                      fired with a lateness in that bucket; see claim.lua)
--
-- schedule, claim and purge take an eighth key (other scripts put their own
-- extra keys there, so the seven above stay the common part):
--   KEYS[8] traces     HASH  id -> W3C traceparent of the span that scheduled
--                      the timer, only for a timer scheduled inside a sampled
--                      trace and only while it is scheduled: claim moves it
--                      into the timer's fire stream entry, purge drops a
--                      cancelled timer's (see check_traces)

local KEY_TYPES = {'zset', 'hash', 'zset', 'zset', 'zset', 'stream', 'hash'}

-- check_types returns check_type's error reply for the first of KEYS[1..7]
-- holding a foreign type, or nil.
local function check_types()
  for i, want in ipairs(KEY_TYPES) do
    local err = check_type(KEYS[i], want)
    if err then return err end
  end
  return nil
end
