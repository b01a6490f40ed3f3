-- dead_letter (include): append one dead letter to the shard's dead-letter
-- stream KEYS[8], for lease.lua and release.lua.
-- includes: fmt
--
-- dead_letter writes the fire stream entry stream_id (its fields, as the
-- stream reply gives them) as a dead letter: the event's id, due, fired and
-- payload, its other fields in name order, then error (cause), attempts,
-- group, consumer and stream_id; it bounds the stream to about maxlen
-- entries (0: unbounded) and returns the dead letter's ID. consumer is the
-- consumer that held the delivery when it died: the owner the pending
-- entry list names, not whoever asks (queue.DeadLetter.Consumer).
local function dead_letter(fields, cause, attempt, group, consumer, stream_id, maxlen)
  local by, rest, vals = {}, {}, {}
  for i = 1, #fields, 2 do by[fields[i]] = fields[i + 1] end
  for _, k in ipairs({'id', 'due', 'fired', 'payload'}) do
    if by[k] then
      vals[#vals + 1] = k
      vals[#vals + 1] = by[k]
      by[k] = nil
    end
  end
  for k in pairs(by) do rest[#rest + 1] = k end
  table.sort(rest)
  for _, k in ipairs(rest) do
    vals[#vals + 1] = k
    vals[#vals + 1] = by[k]
  end
  for _, v in ipairs({'error', cause, 'attempts', fmt(attempt), 'group', group, 'consumer', consumer,
    'stream_id', stream_id}) do
    vals[#vals + 1] = v
  end
  if maxlen > 0 then
    return redis.call('XADD', KEYS[8], 'MAXLEN', '~', maxlen, '*', unpack(vals))
  end
  return redis.call('XADD', KEYS[8], '*', unpack(vals))
end
