-- cancel.lua: cancel a scheduled timer and wake its waiters.
--
-- KEYS: the namespace's seven keys (see includes/check_types.lua).
-- ARGV[1] id
-- ARGV[2] retention_ms: how long the cancelled record is kept; 0 = forever
-- ARGV[3] the timer's wakeup channel
-- Reply: {status, record}: status 'ok' (cancelled now), 'cancelled' (it already
--        was: a no-op), 'fired' (too late) or 'notfound' (no record).
-- Complexity: O(log N).

local err = check_types()
if err then return err end

-- Phase 1: read and check.
local id = ARGV[1]
local rec = redis.call('HGET', KEYS[2], id)
if not rec then return {'notfound', ''} end
local state, _, created, _, payload = decode(rec)
if not state then return malformed(id, 'has a malformed record') end
if state == 'f' then return {'fired', rec} end
if state == 'c' then return {'cancelled', rec} end
local due = due_of(id)
if not due then return malformed(id, 'is scheduled but has no due time in ' .. KEYS[1]) end

local now = now_ms()
local retention = tonumber(ARGV[2])

-- Phase 2: probes (cancel_probes: ZADD first, so that Redis refuses a
-- cancel under OOM).
err = probe_all(cancel_probes({}, retention))
if err then return err end

-- Phase 3: publish, then write.
err = cancel_publish(ARGV[3])
if err then return err end
return {'ok', cancel_timer(id, due, created, payload, now, retention)}
