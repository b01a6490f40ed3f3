-- read_probe (include): run a read command once before the first write, for
-- its ACL refusal.
-- includes: refusal
--
-- read_probe runs a read command that the script runs again after its
-- first write, so that Redis applies its ACL refusal before any write; it
-- returns the command's reply, or nil and the refusal's error reply.
local function read_probe(cmd, key, ...)
  local r = redis.pcall(cmd, key, ...)
  if type(r) == 'table' and r.err then return nil, refusal(r.err, cmd, key, 'read') end
  return r, nil
end
