-- pending_end (include): the bound above every due score.
--
-- PENDING_END is an exclusive ZRANGEBYSCORE/ZCOUNT bound above every due
-- time (MAX_MS, the year 9999, is below 2^50) and below the bands where
-- layout 2 keeps settled timers in the same set (includes/layout.lua): a
-- range of due times that stops there reads the scheduled timers only, in
-- either layout.
-- BAND_FIRED, the bound as a number, is where layout 2's fired band starts:
-- a score below it is a due time; BAND_CANCELLED is where its cancelled
-- band starts (includes/layout.lua).
local BAND_FIRED = 1125899906842624 -- 2^50
local BAND_CANCELLED = 2251799813685248 -- 2^51
local PENDING_END = '(1125899906842624'
