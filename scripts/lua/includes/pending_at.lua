-- pending_at (include): the scheduled timer of a given rank by due time.
-- includes: layout pending_end
--
-- pending_at returns the member of KEYS[1] of rank n_s (a string; '0' is
-- the earliest) among the scheduled timers, with its due score, as
-- ZRANGE ... WITHSCORES replies ({} when there is none). In layout 2 the
-- settled timers sort after them, in their bands, and are left out.
local function pending_at(n_s)
  if LAYOUT == 1 then return redis.call('ZRANGE', KEYS[1], n_s, n_s, 'WITHSCORES') end
  return redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', PENDING_END, 'WITHSCORES', 'LIMIT', n_s, '1')
end
