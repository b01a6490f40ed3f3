-- is_ms (include): whether a record's time field is one timerq writes.
-- includes: max_ms
--
-- is_ms reports whether a record's time field is one timerq writes: 1 to
-- 15 ASCII digits (the caller's pattern matched %d) of at most MAX_MS.
-- Up to 14 digits is always at most MAX_MS (15 digits), so only a
-- 15-digit field is parsed: a claim checks one field of every timer.
local function is_ms(s)
  local n = #s
  return n >= 1 and (n <= 14 or (n == 15 and tonumber(s) <= MAX_MS))
end
