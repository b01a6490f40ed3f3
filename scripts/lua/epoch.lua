-- epoch.lua: read an owner's fencing epoch on one shard, or raise it.
--
-- KEYS[1] the shard's owners' epochs (HASH owner -> epoch, keyspace Epochs)
-- ARGV[1] owner
-- ARGV[2] '' to read; '+' to add one (the namespace's first shard, whose
--         epoch of an owner is the highest: queue.BumpEpoch); digits to
--         raise the epoch to that value if it is lower (the other shards)
-- Reply: the owner's epoch on this shard after the call ('0' when it has
--        none).
-- Complexity: O(1).
--
-- Its one write, HSET, is refused (ACL, OOM) before it changes anything.

local err = check_type(KEYS[1], 'hash')
if err then return err end
local cur = redis.call('HGET', KEYS[1], ARGV[1]) or '0'
local want = ARGV[2]
if want == '' then return cur end
if want == '+' then
  want = fmt(tonumber(cur) + 1)
elseif tonumber(want) <= tonumber(cur) then
  return cur
end
local r = redis.pcall('HSET', KEYS[1], ARGV[1], want)
if type(r) == 'table' and r.err then return refusal(r.err, 'HSET', KEYS[1], 'write') end
return want
