-- take_values (include): move an optional hash's values for the timers about
-- to fire into their events (reads the hash).
-- includes: check_hash refusal
--
-- take_values reads what an optional hash (the traces, the deliveries)
-- holds for the IDs of the timers about to fire (e[1] of each event) into
-- e[slot], and returns the IDs it found, which the fire then deletes from
-- the hash; or nil and an error reply. With some false, the caller knows
-- nothing of the hash: it is read only when it exists (a TYPE first), so
-- a namespace that never traced or delivered pays one TYPE. With some
-- true, the caller knows that the hash or its companion exists
-- (any_exists): the HMGET goes ahead and checks the type itself, a TYPE
-- running only to word its WRONGTYPE.
local function take_values(key, events, slot, some)
  local found = {}
  if #events == 0 then return found, nil end
  if not some then
    local exists, err = check_hash(key)
    if err then return nil, err end
    if not exists then return found, nil end
  end
  local ids = {}
  for i, e in ipairs(events) do ids[i] = e[1] end
  local values = redis.pcall('HMGET', key, unpack(ids))
  if values.err then
    if string.sub(values.err, 1, 9) == 'WRONGTYPE' then
      local _, err = check_hash(key)
      return nil, err or redis.error_reply(values.err)
    end
    return nil, refusal(values.err, 'HMGET', key, 'read')
  end
  for i, e in ipairs(events) do
    if values[i] then
      e[slot] = values[i]
      found[#found + 1] = e[1]
    end
  end
  return found, nil
end
