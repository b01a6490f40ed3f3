-- is_due (include): whether an argument is a due score string.
--
-- is_due reports whether s is a due score string as the client sends one:
-- '<ms>' or '<ms>.<us>' with three digits of microseconds.
-- The byte four from the end picks the one pattern that can match: a
-- '.' there for '<ms>.<us>', anything else for '<ms>'.
local function is_due(s)
  if string.byte(s, -4) == 46 then return string.match(s, '^%d+%.%d%d%d$') ~= nil end
  return string.match(s, '^%d+$') ~= nil
end
