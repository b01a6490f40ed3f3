-- resolve_due (include): turn a due argument (absolute, 'now' or relative)
-- into a due score (reads TIME once per call).
-- includes: fmt now_ms
--
-- resolve_due turns a due argument into a due score string. The argument
-- is an absolute due score ('<ms>' or '<ms>.<us>'), 'now' for the server's
-- clock, or '+<ms>.<us>' (us 0-999) for that long after the server's
-- clock. A relative due time is TIME's microseconds plus the delay, exact
-- to the microsecond, so it is never early; the parts are added separately
-- so that each stays an exact integer in a double.
-- Every relative due time of one call counts from the same TIME, read once.
-- relative_base is that TIME and relative_for the call it was read for
-- (its ARGV table, new on every call): as a Redis function the include
-- outlives the call (scripts.go: Library), and a TIME kept from an earlier
-- call would make a later call's due times early. A script that read TIME
-- itself may seed both (relative_base, relative_for = t, ARGV), as
-- debounce.lua does, so that its now and its due times share one clock.
local relative_base, relative_for
local function resolve_due(arg)
  -- Absolute due times, the common case, pay one byte comparison.
  if string.byte(arg, 1) ~= 43 then -- not '+'
    if arg == 'now' then return fmt(now_ms()) end
    return arg
  end
  local ms, us = string.match(arg, '^%+(%d+)%.(%d%d%d)$')
  if not ms then return arg end
  if relative_for ~= ARGV then relative_base, relative_for = redis.call('TIME'), ARGV end
  local t = relative_base
  local sec, usec = tonumber(t[1]), tonumber(t[2])
  local sub = usec % 1000 + tonumber(us)
  local whole = sec * 1000 + math.floor(usec / 1000) + tonumber(ms) + math.floor(sub / 1000)
  if sub % 1000 == 0 then return fmt(whole) end
  return fmt(whole) .. '.' .. string.format('%03d', sub % 1000)
end
