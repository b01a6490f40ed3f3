-- score_ms (include): a due set score as a due score string.
-- includes: fmt_due max_ms
--
-- score_ms turns a due set score into a due score string ('<ms>' or
-- '<ms>.<us>', fmt_due), or nil when it is not a number from 0 to before
-- MAX_MS + 1 (only a hand-written ZADD gives one).
local function score_ms(score)
  -- Redis writes a whole score below 1e17 as its digits: keep them rather
  -- than parse and format them again (a claim does this for every timer).
  -- Up to 14 digits is below MAX_MS (15 digits).
  if type(score) == 'string' and #score <= 14 and string.find(score, '^%d+$') then return score end
  local d = tonumber(score)
  if not d or d < 0 or d >= MAX_MS + 1 then return nil end
  return fmt_due(d)
end
