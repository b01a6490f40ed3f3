-- score_ms (include): a due set score as a due score string.
-- includes: fmt_due max_ms
--
-- score_ms turns a due set score into a due score string ('<ms>' or
-- '<ms>.<us>', fmt_due), or nil when it is not a number from 0 to before
-- MAX_MS + 1 (only a hand-written ZADD gives one).
local function score_ms(score)
  local d = tonumber(score)
  if not d or d < 0 or d >= MAX_MS + 1 then return nil end
  -- Redis writes a whole score below 1e17 as its digits: keep them rather
  -- than format them again (a claim does this for every timer).
  if type(score) == 'string' and string.find(score, '^%d+$') then return score end
  return fmt_due(d)
end
