-- malformed (include): the error reply for a malformed record (names KEYS[1]
-- and KEYS[2]).
--
-- malformed is the error reply for a record that decode rejects, or for a
-- scheduled timer without a due time; it names the timer and the way out.
local function malformed(id, why)
  id = string.gsub(id, '%c', '?')
  return redis.error_reply('TIMERQ_MALFORMED timer "' .. id .. '" in ' .. KEYS[2] .. ' ' .. why ..
    ', so timerq changed nothing; something other than timerq wrote it: inspect it (HGET ' .. KEYS[2] ..
    ' and ZSCORE ' .. KEYS[1] .. '), then remove it (HDEL and ZREM) or reschedule it')
end
