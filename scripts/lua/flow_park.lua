-- flow_park.lua: park leased fires that flow control holds back
-- (queue.Lease under flow policies): acknowledge each in the consumer
-- group, so that no lease runs out on it, and keep it in the shard's
-- parked set until its flow may be tried again. The parked set and the
-- group's pending entry list change in one script, so a fire is always in
-- exactly one of them, whatever process dies when.
--
-- KEYS[1] fires   STREAM the shard's fire stream
-- KEYS[2] ready   ZSET   flow -> Redis time (ms) it may next be tried
--                        (keyspace FlowReady)
-- KEYS[3] parked  ZSET   all score 0, member
--                        "<flow>\0<padded stream entry ID>\0<attempt>"
--                        (keyspace FlowParked)
-- KEYS[4] hint    HASH   flow -> how many fires flow_pop.lua takes when
--                        the flow is next tried (keyspace FlowHint)
-- ARGV[1] group
-- ARGV[2] consumer: only its deliveries are parked
-- ARGV[3..] per flow: flow, next_ms, hint, n, then n pairs: stream entry
--         ID, attempt (the delivery as leased)
-- Reply: how many fires were parked. A delivery no longer pending with
--        this consumer at this attempt (its lease ran out and another
--        consumer has it, or it was settled) is left alone.
-- Complexity: O(log P + log Q) per fire, for P pending entries and Q
--        parked fires.

local err = check_type(KEYS[1], 'stream') or check_type(KEYS[2], 'zset') or check_type(KEYS[3], 'zset') or check_type(KEYS[4], 'hash')
if err then return err end
local group, consumer = ARGV[1], ARGV[2]

local acks, members, ready, hints = {}, {}, {}, {}
local a = 3
while a <= #ARGV do
  local flow, nxt, hint, n = ARGV[a], ARGV[a + 1], ARGV[a + 2], tonumber(ARGV[a + 3])
  local parked = 0
  for j = 0, n - 1 do
    local id, attempt = ARGV[a + 4 + 2 * j], ARGV[a + 5 + 2 * j]
    local p = redis.pcall('XPENDING', KEYS[1], group, id, id, 1)
    if type(p) == 'table' and p.err then
      if not string.find(p.err, 'NOGROUP', 1, true) then return refusal(p.err, 'XPENDING', KEYS[1], 'read') end
    elseif #p == 1 and p[1][2] == consumer and tonumber(p[1][4]) == tonumber(attempt) then
      local ms, seq = string.match(id, '^(%d+)-(%d+)$')
      acks[#acks + 1] = id
      members[#members + 1] = '0'
      members[#members + 1] = flow .. '\0' .. string.format('%015.0f-%010.0f', tonumber(ms), tonumber(seq)) .. '\0' .. attempt
      parked = parked + 1
    end
  end
  if parked > 0 then
    ready[#ready + 1] = nxt
    ready[#ready + 1] = flow
    hints[#hints + 1] = flow
    hints[#hints + 1] = hint
  end
  a = a + 4 + 2 * n
end
if #acks == 0 then return 0 end

-- Phase 2: probes, XACK first (Redis never refuses it for memory).
local r = redis.pcall('XACK', KEYS[1], group, '0-0')
if type(r) == 'table' and r.err then return refusal(r.err, 'XACK', KEYS[1]) end
err = probe_all({{'ZADD', KEYS[3]}, {'ZADD', KEYS[2]}, {'HSET', KEYS[4]}})
if err then return err end

-- Phase 3: writes.
redis.call('XACK', KEYS[1], group, unpack(acks))
redis.call('ZADD', KEYS[3], unpack(members))
redis.call('ZADD', KEYS[2], unpack(ready))
redis.call('HSET', KEYS[4], unpack(hints))
return #acks
