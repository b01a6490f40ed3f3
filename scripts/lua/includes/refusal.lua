-- refusal (include): the error reply for a command Redis refused.
-- includes: acl_kind acl_refused ns_prefix
--
-- refusal turns the error of a command Redis refused into the script's
-- error reply. An ACL refusal (acl_refused) becomes a NOPERM reply naming
-- the missing right and the rule that grants it; any other refusal (OOM,
-- READONLY, MISCONF) keeps Redis's own code. access is 'read' or, by
-- default, 'write': what cmd does to the key target.
local function refusal(err, cmd, target, access)
  if not acl_refused(err) then
    return redis.error_reply(err)
  end
  local what, rule
  local kind = acl_kind(err)
  if kind == 'channel' then
    what, rule = 'publish to the channel ' .. target, '&' .. ns_prefix() .. '*'
  elseif kind == 'key' then
    what, rule = (access or 'write') .. ' the key ' .. target, '~' .. ns_prefix() .. '*'
  else
    what, rule = 'run ' .. cmd, '+' .. string.lower(cmd)
  end
  return redis.error_reply('NOPERM timerq: the Redis user may not ' .. what ..
    ' (' .. cmd .. ' in a timerq script); grant it with the ACL rule ' .. rule ..
    ' (Redis said: ' .. string.gsub(err, '^ERR ', '') .. ')')
end
