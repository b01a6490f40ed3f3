-- publish (include): PUBLISH one message, its refusal an error reply.
-- includes: refusal
--
-- publish sends one message, and returns an error reply if Redis refused it.
local function publish(channel, msg)
  local r = redis.pcall('PUBLISH', channel, msg)
  if type(r) == 'table' and r.err then return refusal(r.err, 'PUBLISH', channel) end
  return nil
end
