-- prelude.lua: helpers shared by every timerq script. scripts.go prepends it
-- to each script before loading, so every script sees these locals.
--
-- Every script receives the same six keys of one namespace, all sharing one
-- hash tag so that a script never crosses a Cluster slot:
--   KEYS[1] due        ZSET  id -> due_ms, scheduled timers only
--   KEYS[2] timers     HASH  id -> record (see encode below)
--   KEYS[3] fired      ZSET  id -> due_ms, fired timers awaiting purge
--   KEYS[4] cancelled  ZSET  id -> due_ms, cancelled timers awaiting purge
--   KEYS[5] expire     ZSET  id -> purge_at_ms, settled timers with a retention
--   KEYS[6] fires      STREAM one entry per fired timer
--
-- Numbers are formatted with '%.0f', never tostring or '..': real Redis
-- prints Lua numbers with %.14g, which would corrupt a 15-digit millisecond
-- timestamp (any instant after 2286).

local KEY_TYPES = {'zset', 'hash', 'zset', 'zset', 'zset', 'stream'}

local function fmt(n)
  return string.format('%.0f', n)
end

-- now_ms is the Redis server's clock: the only clock timerq trusts.
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- resolve_due turns a due argument into due_ms. The argument is an absolute
-- due_ms, 'now' for the server's clock, or '+<ms>.<us>' (us 0-999) for that
-- long after the server's clock. A relative due time is computed from TIME's
-- microseconds and rounded up to the millisecond, so it is never early, even
-- below a millisecond; the parts are added separately so that each stays an
-- exact integer in a double.
-- Every relative due time of one call counts from the same TIME, read once.
local relative_base
local function resolve_due(arg)
  -- Absolute due times, the common case, pay one byte comparison.
  if string.byte(arg, 1) ~= 43 then -- not '+'
    if arg == 'now' then return fmt(now_ms()) end
    return arg
  end
  local ms, us = string.match(arg, '^%+(%d+)%.(%d%d%d)$')
  if not ms then return arg end
  relative_base = relative_base or redis.call('TIME')
  local t = relative_base
  local sec, usec = tonumber(t[1]), tonumber(t[2])
  local sub = usec % 1000 + tonumber(us)
  return fmt(sec * 1000 + math.floor(usec / 1000) + tonumber(ms) + math.ceil(sub / 1000))
end

-- check_types returns an error reply when a key holds a foreign type. It runs
-- before any write because a script that fails half way does not roll back.
local function check_types()
  for i, want in ipairs(KEY_TYPES) do
    local got = redis.call('TYPE', KEYS[i])
    if type(got) == 'table' then got = got['ok'] end
    if got ~= 'none' and got ~= want then
      return redis.error_reply('WRONGTYPE key ' .. KEYS[i] .. ' holds a ' .. got ..
        ' where timerq keeps a ' .. want)
    end
  end
  return nil
end

-- A record is "<state>:<due_ms>:<created_ms>:<settled_ms>:<payload>", state
-- being s (scheduled), f (fired) or c (cancelled). While scheduled, due_ms
-- and settled_ms are empty: the due time lives only in the due set, which
-- saves 16 bytes per pending timer and lets reschedule touch one key. The
-- payload goes last so it may hold any bytes.
local function encode(state, due, created, settled, payload)
  return state .. ':' .. due .. ':' .. created .. ':' .. settled .. ':' .. payload
end

local function decode(rec)
  local state, due, created, settled, at = string.match(rec, '^(%a):(%d*):(%d+):(%d*):()')
  return state, due, created, settled, string.sub(rec, at)
end

-- due_of returns a scheduled timer's due_ms from the due set.
local function due_of(id)
  return fmt(tonumber(redis.call('ZSCORE', KEYS[1], id)))
end

-- full fills in the due time of a scheduled record for a reply.
local function full(id, rec)
  if string.sub(rec, 1, 3) ~= 's::' then return rec end
  return 's:' .. due_of(id) .. string.sub(rec, 3)
end
