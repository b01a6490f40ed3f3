-- recur_prelude.lua: helpers of the recurring-schedule scripts, prepended
-- after prelude.lua (the table in scripts.go). Those scripts take one shard's
-- keys, in prelude.lua's order, and two more last, with the same hash tag:
-- the schedules of that shard, whose occurrences live in it too.
-- They are addressed from the end, so that the timer keys may grow:
--   SCHED_KEY = KEYS[#KEYS-1] schedules  HASH  schedule id -> record (below)
--   SDUE_KEY  = KEYS[#KEYS]   sched-due  ZSET  schedule id -> due ms of its earliest pending
--                      occurrence: once that is well past, the occurrence
--                      fired without its successor being armed, and the
--                      repair pass tops the schedule up. Active schedules only.
--
-- A schedule record's codec (sdecode, sencode) is in prelude.lua, which
-- overlap.lua shares. An occurrence is an ordinary timer with ID
-- "<schedule id>@<nominal ms>".

local SCHED_KEY, SDUE_KEY = KEYS[#KEYS - 1], KEYS[#KEYS]

local function check_recur_types()
  local err = check_types()
  if err then return err end
  return check_type(SCHED_KEY, 'hash') or check_type(SDUE_KEY, 'zset')
end

local function split(csv)
  local t = {}
  for n in string.gmatch(csv, '%d+') do t[#t + 1] = n end
  return t
end

local function occ_id(sid, nominal)
  return sid .. '@' .. nominal
end
