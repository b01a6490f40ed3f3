-- pending_at (include): the scheduled timer of a given rank by due time.
-- includes: layout pending_end
--
-- pending_at returns the member of KEYS[1] of rank n_s (a string; '0' is
-- the earliest) among the scheduled timers, with its due score, as
-- ZRANGE ... WITHSCORES replies ({} when there is none). In layout 2 the
-- settled timers sort after them, in their bands: the member of rank n_s
-- is a scheduled timer exactly when its score is below BAND_FIRED, so
-- pending_at reads it by rank, as in layout 1, and drops a band's. A
-- ZRANGEBYSCORE that stops at PENDING_END, with its LIMIT, cost about
-- 2,300 instructions more than the ZRANGE and the tonumber (callgrind,
-- BENCHMARKS.md, "Layout 2's claim, leaner"), and every claim runs one.
local function pending_at(n_s)
  local r = redis.call('ZRANGE', KEYS[1], n_s, n_s, 'WITHSCORES')
  if LAYOUT == 2 and r[2] and not (tonumber(r[2]) < BAND_FIRED) then return {} end
  return r
end
