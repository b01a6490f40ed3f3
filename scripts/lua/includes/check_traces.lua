-- check_traces (include): check the traces hash, KEYS[8].
-- includes: check_hash
--
-- check_traces checks KEYS[8], the traces hash, and reports whether it
-- exists, so that a script reads it only when some timer was traced: with
-- tracing off the hash never exists, and it costs one TYPE per call.
-- It returns exists, err.
local function check_traces() return check_hash(KEYS[8]) end
