-- meta (include): new timers' owners, labels, epochs and deadlines
-- (keyspace TimerMeta, Owners, Epochs): the one writer of the meta hash and
-- the owner index for every script that creates timers.
-- includes: acl_probe check_type fmt
--
-- A script that creates timers takes, per timer, a meta argument as
-- queue's metaArg makes it: '' for none, else
-- '<expected epoch>\31<deadline>\31<owner>' and '\31<key>=<value>' per
-- label (expected epoch '' takes the owner's current one; deadline '' for
-- none, '<ms>', or '+<ms>' after the due ms). meta_batch starts a batch
-- for one call; meta_add reads what a timer needs (its owner's epoch, once
-- per owner and call) and queues its writes, returning the stored meta,
-- '<epoch>\31<deadline ms>\31<owner>...', or refuses a timer due after
-- its absolute deadline; meta_replace queues the removal
-- of what a timer's old meta leaves behind when the timer is written again
-- (a recurring occurrence rewritten or revived); meta_check checks the
-- types of the keys the batch writes and meta_probes asks the ACL for
-- them, both before the script's first write; meta_write writes.
local function meta_batch(metas, owners, epochs)
  return {metas = metas, owners = owners, epochs_key = epochs, epochs = {}, hset = nil, zadd = nil,
    hdel = nil, zrem = nil}
end

-- meta_add queues the meta of the new timer id, due at due (a due score
-- string), from its argument arg (not ''); it returns the stored meta, or
-- nil and an error reply: 'TIMERQ_EPOCH <current> <owner>' when arg expects
-- an epoch its owner is not at, 'TIMERQ_FIREBY <deadline ms> <due> <id>'
-- when arg's absolute deadline is before due's millisecond. It writes
-- nothing, so a caller runs it before its first write.
local function meta_add(b, id, due, arg)
  local expect, deadline, owner, labels = string.match(arg, '^(%d*)\31([+%d]*)\31([^\31]*)(.*)$')
  if not expect then return nil, redis.error_reply('ERR timerq: malformed meta of timer "' .. id .. '"') end
  -- The client checks an absolute due time against its deadline; a
  -- relative one is known only here, resolved by the server's clock. A
  -- deadline before the due millisecond could never be met: the fire
  -- would only ever be dead-lettered.
  if deadline ~= '' and string.byte(deadline, 1) ~= 43 and
      tonumber(deadline) < tonumber(string.match(due, '^%d+')) then
    return nil, redis.error_reply('TIMERQ_FIREBY ' .. deadline .. ' ' .. due .. ' ' .. id)
  end
  local epoch = '0'
  if owner ~= '' then
    epoch = b.epochs[owner]
    if not epoch then
      local r = redis.pcall('HGET', b.epochs_key, owner)
      if type(r) == 'table' and r.err then
        return nil, check_type(b.epochs_key, 'hash') or redis.error_reply(r.err)
      end
      epoch = r or '0'
      b.epochs[owner] = epoch
    end
    if expect ~= '' and expect ~= epoch then
      return nil, redis.error_reply('TIMERQ_EPOCH ' .. epoch .. ' ' .. owner)
    end
    local z = b.zadd or {}
    b.zadd = z
    z[#z + 1] = '0'
    z[#z + 1] = owner .. '\0' .. id
  end
  if string.byte(deadline, 1) == 43 then -- '+': after the due ms
    -- At most the latest time a record holds (queue's maxMillis, the end
    -- of 9999): a deadline past it is none in effect, and a larger number
    -- would not read back as a time.
    deadline = fmt(math.min(tonumber(string.match(due, '^%d+')) + tonumber(string.sub(deadline, 2)), 253402300799999))
  end
  local m = epoch .. '\31' .. deadline .. '\31' .. owner .. labels
  local h = b.hset or {}
  b.hset = h
  h[#h + 1] = id
  h[#h + 1] = m
  return m, nil
end

-- meta_replace queues, for the timer id that already has the meta old
-- (as the meta hash holds it; nil for none) and is written again with the
-- meta new (meta_add's reply; nil for none), the removal of what new does
-- not overwrite: the hash field when new is nil, and the index entry of
-- the old owner when new names another owner or none. meta_add only adds,
-- and purge.lua removes only the entry of the owner the meta names when
-- it runs, so without this the old owner would keep counting (NextWake)
-- and selecting (CancelMatching) the timer, and a timer without meta now
-- would keep the old labels, until purge and, for the entry, for ever.
local function meta_replace(b, id, old, new)
  if not old or old == new then return end
  if not new then
    local h = b.hdel or {}
    b.hdel = h
    h[#h + 1] = id
  end
  local owner = string.match(old, '^[^\31]*\31[^\31]*\31([^\31]*)') or ''
  local owner_now = new and string.match(new, '^[^\31]*\31[^\31]*\31([^\31]*)') or ''
  if owner ~= '' and owner ~= owner_now then
    local z = b.zrem or {}
    b.zrem = z
    z[#z + 1] = owner .. '\0' .. id
  end
end

-- meta_check checks the types of the keys the batch writes; an error
-- reply or nil.
local function meta_check(b)
  if not (b.hset or b.hdel or b.zrem) then return nil end
  return check_type(b.metas, 'hash') or ((b.zadd or b.zrem) and check_type(b.owners, 'zset')) or nil
end

-- meta_probes asks the ACL for the batch's writes (their types checked by
-- meta_check); an error reply or nil.
local function meta_probes(b)
  return (b.hset and acl_probe('HSET', b.metas)) or (b.zadd and acl_probe('ZADD', b.owners)) or
    (b.hdel and acl_probe('HDEL', b.metas)) or (b.zrem and acl_probe('ZREM', b.owners)) or nil
end

-- meta_write writes the batch, 1,000 values (500 timers, or 1,000 removals) a command:
-- unpack refuses more than about 8,000 values, and recur_arm.lua batches
-- the occurrences of every schedule it tops up, which may be more. The
-- probes and checks above cover every slice: each is the same command on
-- the same key.
local function write_slices(cmd, key, vals)
  if not vals then return end
  for from = 1, #vals, 1000 do
    redis.call(cmd, key, unpack(vals, from, math.min(from + 999, #vals)))
  end
end

local function meta_write(b)
  if not (b.hset or b.hdel) then return end -- the common call: no meta (a zrem comes with one of them)
  write_slices('HDEL', b.metas, b.hdel)
  write_slices('ZREM', b.owners, b.zrem)
  write_slices('HSET', b.metas, b.hset)
  write_slices('ZADD', b.owners, b.zadd)
end
