-- check_hash (include): check an optional hash key and whether it exists.
-- includes: layout_marker
--
-- check_hash checks an optional hash key and reports whether it exists,
-- with one TYPE. It returns exists, err.
local function check_hash(key)
  local got = redis.call('TYPE', key)
  if type(got) == 'table' then got = got['ok'] end
  if got == 'none' then return false, nil end
  if got ~= 'hash' then
    return false, layout_marker(key, got) or redis.error_reply('WRONGTYPE key ' .. key .. ' holds a ' .. got ..
      ' where timerq keeps a hash')
  end
  return true, nil
end
