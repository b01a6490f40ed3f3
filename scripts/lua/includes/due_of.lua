-- due_of (include): a scheduled timer's due score (reads KEYS[1]).
-- includes: score_ms
--
-- due_of returns a scheduled timer's due score string (score_ms), or nil when
-- it has none (a scheduled record left half-written by an older timerq,
-- whose scripts wrote before they published) or a score that is no due
-- time (score_ms).
local function due_of(id)
  local score = redis.call('ZSCORE', KEYS[1], id)
  if not score then return nil end
  return score_ms(score)
end
