-- endpoint_put.lua: create or replace one delivery endpoint, within the
-- namespace's endpoints quota.
--
-- KEYS[1] the namespace's endpoints hash (keyspace Namespace.Endpoints):
--         name -> the endpoint as JSON
-- ARGV[1] the endpoint's name
-- ARGV[2] the endpoint as JSON (queue.Endpoint, validated by the client)
-- ARGV[3] the namespace's endpoints quota (queue.Quotas.Endpoints): the most
--         endpoints KEYS[1] may hold; '0' for none
-- Reply: 1 when it created the endpoint, 0 when it replaced one. A new
--        endpoint when KEYS[1] already holds ARGV[3] is refused:
--        'TIMERQ_QUOTA endpoints <quota> <held> 1', and nothing written;
--        replacing one is never refused.
-- Complexity: O(1).
--
-- Its one write is the HSET, after every check: a refusal writes nothing.

local err = check_type(KEYS[1], 'hash')
if err then return err end
local quota = tonumber(ARGV[3])
if quota > 0 and redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then
  err = over_quota('endpoints', quota, redis.call('HLEN', KEYS[1]), 1)
  if err then return err end
end
return redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
