-- recur_load.lua: read schedules with the server clock and their pending
-- occurrences, for Go to plan what to arm next.
--
-- KEYS: one shard's keys (includes/check_types.lua), then its schedules and sched-due (see
--       includes/recur_keys.lua).
-- ARGV[1] 'ids' then ARGV[2..] schedule ids; or 'due', ARGV[2] grace_ms,
--         ARGV[3] limit: the schedules whose earliest pending occurrence was
--         due more than grace_ms ago and has fired without the schedule
--         being topped up since (the repair pass). A schedule whose armed
--         occurrences are all still pending is only late because claims are
--         behind: it is not returned, and its sched-due score moves to now,
--         so the next passes look at others first and at it again after
--         the grace.
-- Reply: {now_ms, scanned, id_1, record_1, pending_1, id_2, ...}; scanned
--        is how many schedules were looked at; record is '' when the
--        schedule does not exist; pending is a comma list of
--        "<nominal_ms>=<due_ms>" for armed occurrences still scheduled.
-- Complexity: O(k * (1 + a) * log N) for k schedules with a armed each.

recur_keys()
local err = check_recur_types()
if err then return err end

local now = now_ms()
local ids = {}
local repair = ARGV[1] == 'due'
if repair then
  ids = redis.call('ZRANGEBYSCORE', SDUE_KEY, '-inf', now - tonumber(ARGV[2]), 'LIMIT', 0, tonumber(ARGV[3]))
else
  for i = 2, #ARGV do ids[#ids + 1] = ARGV[i] end
end

local reply = {fmt(now), #ids}
local behind = {}
for _, sid in ipairs(ids) do
  local rec = redis.call('HGET', SCHED_KEY, sid)
  local pending, narmed = {}, 0
  if rec then
    local _, _, _, _, armed = sdecode(rec)
    for _, n in ipairs(split(armed)) do
      narmed = narmed + 1
      local due = redis.call('ZSCORE', KEYS[1], occ_id(sid, n))
      -- (in layout 2 a settled occurrence sorts in a band of KEYS[1])
      if due and tonumber(due) < BAND_FIRED then pending[#pending + 1] = n .. '=' .. fmt_due(tonumber(due)) end
    end
  end
  if repair and narmed > 0 and #pending == narmed then
    behind[#behind + 1] = fmt(now)
    behind[#behind + 1] = sid
  else
    reply[#reply + 1] = sid
    reply[#reply + 1] = rec or ''
    reply[#reply + 1] = table.concat(pending, ',')
  end
end
if #behind > 0 then
  err = probe('ZADD', SDUE_KEY)
  if err then return err end
  redis.call('ZADD', SDUE_KEY, 'XX', unpack(behind))
end
return reply
