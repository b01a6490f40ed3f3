-- is_ms (include): whether a record's time field is one timerq writes.
-- includes: max_ms
--
-- is_ms reports whether a record's time field is one timerq writes: 1 to
-- 15 ASCII digits (the caller's pattern matched %d) of at most MAX_MS.
local function is_ms(s)
  return #s >= 1 and #s <= 15 and tonumber(s) <= MAX_MS
end
