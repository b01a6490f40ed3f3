-- stats.lua: counts per state and the overdue backlog, by the server clock.
--
-- KEYS: the namespace's seven keys (see includes/check_types.lua).
-- ARGV: none.
-- Reply: {now, scheduled, fired, cancelled, earliest_score_or_empty, overdue}
--        where now is the server clock to the microsecond, as a due score
--        string (clock_due), so that the age of the earliest due time is
--        exact, and fired and cancelled count records not yet purged.
-- Complexity: O(log N).

local err = check_types()
if err then return err end

local now = clock_due(redis.call('TIME'))
local head = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
return {
  now,
  redis.call('ZCARD', KEYS[1]),
  redis.call('ZCARD', KEYS[3]),
  redis.call('ZCARD', KEYS[4]),
  head[2] or '',
  redis.call('ZCOUNT', KEYS[1], '-inf', now),
}
