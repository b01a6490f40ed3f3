-- check_type (include): check that one key holds the type timerq keeps in it.
-- includes: layout_marker
--
-- check_type returns an error reply when key holds a type other than want
-- (TYPE; a missing key passes), or layout_marker's when the key is a later
-- layout's marker. It runs before any write because a script
-- that fails half way does not roll back.
local function check_type(key, want)
  local got = redis.call('TYPE', key)
  if type(got) == 'table' then got = got['ok'] end
  if got ~= 'none' and got ~= want then
    return layout_marker(key, got) or redis.error_reply('WRONGTYPE key ' .. key .. ' holds a ' .. got ..
      ' where timerq keeps a ' .. want)
  end
  return nil
end
