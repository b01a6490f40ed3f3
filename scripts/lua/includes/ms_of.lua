-- ms_of (include): the whole millisecond of a due score string.
--
-- ms_of is the whole millisecond of a due score string, floored.
local function ms_of(due)
  return string.match(due, '^%d+')
end
