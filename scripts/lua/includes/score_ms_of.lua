-- score_ms_of (include): the whole millisecond of a due set score.
-- includes: ms_of score_ms
--
-- score_ms_of returns the millisecond part of score_ms(score) (ms_of), or
-- nil when score is no due time, in the common case without parsing and
-- formatting the score as a number. A score comes from Redis as a string
-- that reads back as the same double (%.17g in Redis 7.0, the shortest
-- such string in 7.2 and later), so a score of at most 14 whole digits
-- written '<digits>' or '<digits>.<fraction>' has its whole digits as
-- the double's floor, which is what score_ms keeps, unless fmt_due rounds
-- the microseconds up to the next millisecond: a fraction of .9995 or
-- more, which prints as '999...'. Those, and every other form (an
-- exponent, a sign, 'inf', 15 digits), take score_ms. A claim runs this
-- for every timer it fires, and a timerq due score has microseconds: the
-- tonumber (glibc's multi-precision strtod for a fraction) and fmt_due
-- it skips are most of 10,000 instructions a timer (BENCHMARKS.md,
-- "Fewer commands a claim").
local function score_ms_of(score)
  -- (the fraction's first three digits captured, so that no string.sub
  -- is needed to compare them)
  local ms, frac3 = string.match(score, '^(%d+)%.?(%d?%d?%d?)%d*$')
  if ms and #ms <= 14 and frac3 ~= '999' then return ms end
  local due_s = score_ms(score)
  return due_s and ms_of(due_s)
end
