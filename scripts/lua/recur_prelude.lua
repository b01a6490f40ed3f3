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
-- A schedule record is "<version>:<state>:<count>:<last_ms>:<armed>:<body>":
-- version counts puts, updates, pauses and resumes (the arm script refuses a
-- plan made from another version); state is a (active), p (paused) or e
-- (ended: nothing more to arm); count is how many occurrences were armed and
-- not cancelled (fired plus pending), for a maximum count; last_ms is the
-- nominal time of the last occurrence armed or skipped, from which Go
-- computes the next; armed is a comma list of the nominal ms of occurrences
-- armed and maybe still pending; body is JSON from Go that no script reads.
-- An occurrence is an ordinary timer with ID "<schedule id>@<nominal ms>".

local SCHED_KEY, SDUE_KEY = KEYS[#KEYS - 1], KEYS[#KEYS]

local function check_recur_types()
  local err = check_types()
  if err then return err end
  return check_type(SCHED_KEY, 'hash') or check_type(SDUE_KEY, 'zset')
end

local function sdecode(rec)
  local v, st, cnt, last, armed, at = string.match(rec, '^(%d+):(%a):(%d+):(%d*):([%d,]*):()')
  return tonumber(v), st, tonumber(cnt), last, armed, string.sub(rec, at)
end

local function sencode(v, st, cnt, last, armed, body)
  return fmt(v) .. ':' .. st .. ':' .. fmt(cnt) .. ':' .. last .. ':' .. armed .. ':' .. body
end

local function split(csv)
  local t = {}
  for n in string.gmatch(csv, '%d+') do t[#t + 1] = n end
  return t
end

local function occ_id(sid, nominal)
  return sid .. '@' .. nominal
end
