-- is_due (include): whether an argument is a due score string.
--
-- is_due reports whether s is a due score string as the client sends one:
-- '<ms>' or '<ms>.<us>' with three digits of microseconds.
local function is_due(s)
  return string.match(s, '^%d+$') ~= nil or string.match(s, '^%d+%.%d%d%d$') ~= nil
end
