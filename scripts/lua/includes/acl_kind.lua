-- acl_kind (include): what an ACL refusal refused.
--
-- acl_kind says what an ACL refusal err refused: 'command', 'channel' or
-- 'key'. The command wording comes first: Valkey's names the user ("User
-- U has no permissions to run the 'x' command"), whose name may contain
-- "key" or "channel".
local function acl_kind(err)
  if string.find(err, "permissions to run the '", 1, true) or string.find(err, "can't run this command", 1, true) then
    return 'command'
  elseif string.find(err, 'channel', 1, true) then
    return 'channel'
  elseif string.find(err, 'key', 1, true) then
    return 'key'
  end
  return 'command'
end
