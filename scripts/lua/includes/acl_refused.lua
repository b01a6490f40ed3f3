-- acl_refused (include): whether an error is an ACL refusal.
--
-- acl_refused reports whether err, the error of a command run in a script,
-- is an ACL refusal. Redis 7.0 words it "The user executing the script
-- can't ..."; Valkey 8 "ACL failure in script: ..."; both name neither the
-- key nor the channel. Not just "can't": READONLY says "You can't write
-- against a read only replica".
local function acl_refused(err)
  return string.find(err, 'The user executing the script', 1, true) ~= nil or
    string.find(err, 'ACL failure in script', 1, true) ~= nil or string.sub(err, 1, 7) == 'NOPERM '
end
