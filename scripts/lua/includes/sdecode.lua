-- sdecode (include): split a schedule record.
--
-- A schedule record (the schedules hash, recur_keys.lua) is
-- "<version>:<state>:<count>:<last_ms>:<armed>:<overlap>:<body>": version
-- counts puts, updates, pauses and resumes (the arm script refuses a plan
-- made from another version); state is a (active), p (paused) or e (ended:
-- nothing more to arm); count is how many occurrences were armed and not
-- cancelled (fired plus pending), for a maximum count; last_ms is the
-- nominal time of the last occurrence armed or skipped, from which Go
-- computes the next; armed is a comma list of the nominal ms of occurrences
-- armed and maybe still pending; overlap is the overlap policy, allow or
-- skip, which overlap.lua reads; body is JSON from Go that no script reads.
--
-- A record written before the overlap field has the body right after
-- armed, a JSON object ('{', never a letter); its policy is in the body,
-- "overlap":"skip" (encoding/json escapes a quote inside a string value,
-- so that text can only be the field itself). sdecode reads both forms,
-- and every write of a record (sencode) writes the field, so an old record
-- gains it at its next arm or change.
local function sdecode(rec)
  local v, st, cnt, last, armed, at = string.match(rec, '^(%d+):(%a):(%d+):(%d*):([%d,]*):()')
  if not v then return nil end
  local overlap, body_at = string.match(rec, '^(%a+):()', at)
  if not overlap then
    body_at = at
    overlap = string.find(rec, '"overlap":"skip"', at, true) and 'skip' or 'allow'
  end
  return tonumber(v), st, tonumber(cnt), last, armed, overlap, string.sub(rec, body_at)
end
