-- now_ms (include): the server's clock in ms (reads TIME).
-- includes: clock_ms
--
-- now_ms is the Redis server's clock: the only clock timerq trusts.
local function now_ms()
  return clock_ms(redis.call('TIME'))
end
