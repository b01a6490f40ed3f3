-- fmt_due (include): format a due time as a due score string.
-- includes: fmt
--
-- fmt_due formats a due time in ms (a number, maybe fractional) as a due
-- score string, rounded to the microsecond: a score written as '<ms>.<us>'
-- is the double nearest it, which rounds back to the same digits.
local function fmt_due(d)
  local ms = math.floor(d)
  local us = math.floor((d - ms) * 1000 + 0.5)
  if us >= 1000 then ms, us = ms + 1, 0 end
  if us == 0 then return fmt(ms) end
  return fmt(ms) .. '.' .. string.format('%03d', us)
end
