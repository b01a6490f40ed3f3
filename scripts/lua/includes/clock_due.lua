-- clock_due (include): a TIME reply as a due score string.
--
-- Due scores are milliseconds with the microseconds as a fraction,
-- '<ms>' or '<ms>.<us>' (us 3 digits, 001-999), so that a timer is due at
-- its microsecond rather than at the next whole millisecond. A whole-ms
-- score, all that older versions wrote, is one of them. Everything else
-- (records, the fired, cancelled and expire sets, the stream, counters)
-- keeps whole milliseconds; a settled timer's due time is its score's
-- millisecond, floored, as the fire time is TIME's.

-- clock_due is a TIME reply as a due score string: what a score is
-- compared with to decide "is it due" (a score at or below it is). A
-- script that also writes a fire time takes both from one TIME reply
-- (clock_ms and clock_due): from two, the second may be in the next
-- millisecond, and a timer due in it would be written as fired before its
-- due time.
--
-- It is built from TIME's two strings without a number between: seconds,
-- then the microseconds padded to six digits, split after the third. A
-- claim asks for it on every call, and a number formatted or parsed costs
-- more than the strings.
local function clock_due(t)
  local us = t[2]
  if #us < 6 then us = string.rep('0', 6 - #us) .. us end
  return t[1] .. string.sub(us, 1, 3) .. '.' .. string.sub(us, 4)
end
