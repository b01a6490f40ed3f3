-- take_values (include): move an optional hash's values for the timers about
-- to fire into their events (reads the hash).
-- includes: check_hash
--
-- take_values reads what an optional hash (the traces, the deliveries)
-- holds for the IDs of the timers about to fire (e[1] of each event) into
-- e[slot], and returns the IDs it found, which the fire then deletes from
-- the hash; or nil and an error reply. The hash is read only when it
-- exists, so a namespace that never traced or delivered pays one TYPE.
local function take_values(key, events, slot)
  local found = {}
  if #events == 0 then return found, nil end
  local exists, err = check_hash(key)
  if err then return nil, err end
  if not exists then return found, nil end
  local ids = {}
  for i, e in ipairs(events) do ids[i] = e[1] end
  local values = redis.call('HMGET', key, unpack(ids))
  for i, e in ipairs(events) do
    if values[i] then
      e[slot] = values[i]
      found[#found + 1] = e[1]
    end
  end
  return found, nil
end
