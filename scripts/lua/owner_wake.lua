-- owner_wake.lua: how many of an owner's timers on one shard are
-- scheduled, and the earliest due time among them.
--
-- KEYS[1] the shard's owners index (ZSET '<owner>\0<id>' at score 0,
--         keyspace Owners)
-- KEYS[2] the shard's set of due times (layout 1's due, layout 2's sched)
-- ARGV[1] owner
-- Reply: {scheduled, earliest due score or ''}.
-- Complexity: O(m log N) for an owner with m timers on the shard (settled
--        ones awaiting purge included) in a set of N.

local err = check_type(KEYS[1], 'zset') or check_type(KEYS[2], 'zset')
if err then return err end
local members = redis.call('ZRANGEBYLEX', KEYS[1], '[' .. ARGV[1] .. '\0', '(' .. ARGV[1] .. '\1')
if #members == 0 then return {0, ''} end
local skip = #ARGV[1] + 2
local ids = {}
for i, m in ipairs(members) do ids[i] = string.sub(m, skip) end
local n, earliest = 0, nil
-- The scores are read 1,000 at a time: unpack refuses more than about
-- 8,000 values (Lua's C stack), and an owner may have more timers.
for from = 1, #ids, 1000 do
  local to = math.min(from + 999, #ids)
  local scores = redis.call('ZMSCORE', KEYS[2], unpack(ids, from, to))
  for i = 1, to - from + 1 do
    local s = tonumber(scores[i])
    -- A settled timer of layout 2 sits in a band, at or above BAND_FIRED.
    if s and s < BAND_FIRED then
      n = n + 1
      if not earliest or s < earliest then earliest = s end
    end
  end
end
return {n, earliest and fmt_due(earliest) or ''}
