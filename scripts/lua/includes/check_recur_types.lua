-- check_recur_types (include): check the types of the seven keys and of the
-- schedules keys.
-- includes: check_type check_types recur_keys
--
local function check_recur_types()
  local err = check_types()
  if err then return err end
  return check_type(SCHED_KEY, 'hash') or check_type(SDUE_KEY, 'zset')
end
