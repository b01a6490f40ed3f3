-- any_exists (include): how many of a few optional keys exist, in one
-- EXISTS where the ACL allows it.
--
-- any_exists returns how many of the keys a, b (and c) exist, or nil when the
-- user may not run EXISTS on them or the server cannot ask the ACL
-- (redis.acl_check_cmd: Redis before 7.0, miniredis); the caller then
-- checks each key on its own, as before (check_hash). EXISTS is not among
-- the rights a script needs (Script.Commands in scripts.go): a user
-- without it pays a command more, not a refusal. It is asked of the ACL
-- first so that a user without it leaves no ACL LOG entry on every call.
-- One EXISTS of two keys that are usually both missing (no timer traced,
-- none delivering) replaces a TYPE of each.
local function any_exists(a, b, c)
  local check = redis.acl_check_cmd
  if not c then
    if not check or not check('EXISTS', a, b) then return nil end
    return redis.call('EXISTS', a, b)
  end
  if not check or not check('EXISTS', a, b, c) then return nil end
  return redis.call('EXISTS', a, b, c)
end
