-- clock_now (include): the server's clock in whole ms, as a string (reads TIME).
--
-- clock_now is fmt(now_ms()), built from TIME's two strings as clock_due
-- builds its score: the seconds, then the first three digits of the
-- microseconds padded to six. A schedule asks for it on every call, and
-- the two numbers parsed and the one formatted cost more than the strings
-- (BENCHMARKS.md, "Less Lua a claim").
local function clock_now()
  local t = redis.call('TIME')
  local us = t[2]
  if #us < 6 then us = string.rep('0', 6 - #us) .. us end
  return t[1] .. string.sub(us, 1, 3)
end
