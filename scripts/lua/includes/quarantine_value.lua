-- quarantine_value (include): the value the quarantine hash keeps for a
-- record.
--
-- quarantine_value is what the quarantine hash keeps for a record moved
-- aside: "<quarantined_at_ms>:<due score>:<reason>:<raw record>". The
-- score is as Redis gave it (never holding ':'), the reason one of claim's
-- fixed phrases (no ':' either), and the raw record last, byte for byte.
local function quarantine_value(now_s, score, reason, rec)
  return now_s .. ':' .. score .. ':' .. reason .. ':' .. rec
end
