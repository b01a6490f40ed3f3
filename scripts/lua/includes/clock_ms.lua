-- clock_ms (include): a TIME reply in whole milliseconds.
--
-- clock_ms is a TIME reply in whole milliseconds, floored.
local function clock_ms(t)
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
