-- requeue.lua: move one dead letter back onto the fire stream, atomically.
--
-- KEYS[1] fires: the namespace's fire stream
-- KEYS[2] dead: the namespace's dead-letter stream (queue.DeadLetterKey)
-- ARGV[1] the dead letter's entry ID
-- Reply: {'ok', new_fire_stream_id} or {'notfound', ''}.
-- Complexity: O(1) plus the entry's field count.
--
-- The new fire entry carries the event's fields (id, due, fired, payload
-- and any others Consume copied), plus for_group, the group whose handler
-- gave up, so that only that group handles it again (the other groups
-- acknowledge and skip it), and requeued_from, the dead letter's ID. The
-- fields Consume added when dead-lettering (error, attempts, group,
-- consumer, stream_id) are dropped. Adding and deleting in one script means
-- a crash can neither lose the event nor requeue it twice. It runs in
-- the three phases of includes/probe.lua, so a refusal writes nothing.

local err = check_type(KEYS[1], 'stream') or check_type(KEYS[2], 'stream')
if err then return err end

local found = redis.call('XRANGE', KEYS[2], ARGV[1], ARGV[1])
if #found == 0 then return {'notfound', ''} end
local fields = found[1][2]
local drop = {error = true, attempts = true, group = true, consumer = true,
  stream_id = true, for_group = true, requeued_from = true}
local out, group = {}, nil
for i = 1, #fields, 2 do
  local k, v = fields[i], fields[i + 1]
  if k == 'group' then group = v end
  if not drop[k] then
    out[#out + 1] = k
    out[#out + 1] = v
  end
end
if group then
  out[#out + 1] = 'for_group'
  out[#out + 1] = group
end
out[#out + 1] = 'requeued_from'
out[#out + 1] = ARGV[1]
err = probe_all({{'XADD', KEYS[1]}, {'XDEL', KEYS[2]}})
if err then return err end
local id = redis.call('XADD', KEYS[1], '*', unpack(out))
redis.call('XDEL', KEYS[2], ARGV[1])
return {'ok', id}
