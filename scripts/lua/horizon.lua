-- horizon.lua: how many scheduled timers come due within each of a few
-- offsets from now, by the server clock, changing nothing.
--
-- KEYS[1] due: ZSET id -> due score, scheduled timers only (see
--         includes/check_types.lua and includes/clock_due.lua)
-- ARGV: the offsets, whole milliseconds, each >= 0 (queue checks them).
-- Reply: {now, count_1, count_2, ...} where now is the server clock to
--        the microsecond, as a due score string (clock_due), and count_i
--        counts the timers due at or before now + ARGV[i]: cumulative, the
--        overdue ones included, so an offset 0 counts what stats.lua calls
--        overdue.
-- Complexity: O(#ARGV * log N).

local err = check_type(KEYS[1], 'zset')
if err then return err end

-- One TIME for every bound, so the counts are of one instant.
local now = clock_due(redis.call('TIME'))
-- clock_due is '<ms>.<us>': an offset of whole milliseconds adds to the
-- ms part, exactly, and keeps the microseconds.
local ms, us = string.match(now, '^(%d+)(%.%d+)$')
local reply = {now}
for i, off in ipairs(ARGV) do
  local max = now
  if off ~= '0' then
    max = string.format('%.0f', tonumber(ms) + tonumber(off)) .. us
  end
  reply[i + 1] = redis.call('ZCOUNT', KEYS[1], '-inf', max)
end
return reply
