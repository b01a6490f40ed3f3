-- stats.lua: counts per state and the overdue backlog, by the server clock.
--
-- KEYS: the namespace's seven keys (see includes/check_types.lua).
-- ARGV: none.
-- Reply: {now, scheduled, fired, cancelled, earliest_score_or_empty, overdue}
--        where now is the server clock to the microsecond, as a due score
--        string (clock_due), so that the age of the earliest due time is
--        exact, and fired and cancelled count records not yet purged.
-- Complexity: O(log N). In layout 2 the counts are ZCOUNTs of KEYS[1]'s
-- due times and bands (includes/layout.lua).

local err = check_types()
if err then return err end

local now = clock_due(redis.call('TIME'))
local head = pending_at('0')
if LAYOUT == 2 then
  return {
    now,
    redis.call('ZCOUNT', KEYS[1], '-inf', PENDING_END),
    redis.call('ZCOUNT', KEYS[1], fmt(BAND_FIRED), '(' .. fmt(BAND_CANCELLED)),
    redis.call('ZCOUNT', KEYS[1], fmt(BAND_CANCELLED), '+inf'),
    head[2] or '',
    redis.call('ZCOUNT', KEYS[1], '-inf', now),
  }
end
return {
  now,
  redis.call('ZCARD', KEYS[1]),
  redis.call('ZCARD', KEYS[3]),
  redis.call('ZCARD', KEYS[4]),
  head[2] or '',
  redis.call('ZCOUNT', KEYS[1], '-inf', now),
}
