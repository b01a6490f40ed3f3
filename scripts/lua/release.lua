-- release.lua: settle one leased delivery other than by acknowledging it
-- (queue.Release, queue.ExtendLease): hand it back for redelivery after a
-- delay, dead-letter it, or extend its lease. The delivery is named by its
-- stream entry ID and its attempt (its delivery count when it was handed
-- out), so that a caller whose lease expired, and whose event went to
-- another consumer since, cannot touch the newer delivery.
--
-- KEYS[1..7] the shard's seven keys (includes/check_types.lua); only KEYS[6] fires, the
--            shard's fire stream, is read or written, and KEYS[7] counters
--            gains dead_deadline (below)
-- KEYS[8] dead  STREAM the shard's dead-letter stream
-- ARGV[1] group
-- ARGV[2] stream entry ID
-- ARGV[3] attempt of the delivery
-- ARGV[4] op: 'release' (dead-letters instead once attempt >= ARGV[7], or
--         when the delivery after the delay would come past the fire's
--         deadline), 'dead' (dead-letter now), 'deadline' (dead-letter now,
--         for its deadline: counted as one) or 'extend'
-- ARGV[5] ms: release: how long from now until the entry may be delivered
--         again; extend: how long from now until the lease ends; 0..ARGV[6]
-- ARGV[6] lease_ms, the group's lease (queue.LeaseOptions.Lease)
-- ARGV[7] max_attempts
-- ARGV[8] error: why, for a dead letter
-- ARGV[9] dead_maxlen: approximate bound of the dead-letter stream; 0 = none
-- ARGV[10] deadline: the fire's deadline (ms) as its delivery ID carries it
--         (queue.DeliveryRef), '' for none
-- Reply: {'released', at_ms}: redeliverable from at_ms (server clock);
--        {'extended', at_ms}: the lease now ends at at_ms;
--        {'dead', dead_letter_id}; {'deadline', dead_letter_id}: dead
--        for its deadline; {'notpending', ''}: not pending in the
--        group (acknowledged, dead-lettered, or never delivered);
--        {'lost', attempt}: delivered again since, now attempt;
--        {'trimmed', ''}: the entry left the stream (Options.StreamMaxLen):
--        acknowledged, nothing to deliver or dead-letter.
-- Complexity: O(log P) for P pending entries, plus the entry's field count
--        when dead-lettering.
--
-- Redelivery after a delay is the pending entry list's own clock: XCLAIM
-- ... TIME sets the entry's last delivery time to now + ms - lease_ms, so
-- its lease runs out, and Lease's scan (XAUTOCLAIM with lease_ms) hands it
-- over, exactly ms from now. The delivery count is kept (RETRYCOUNT; with
-- JUSTID real Redis would keep it anyway, miniredis would not), so the
-- redelivery counts as one more attempt, as Consume's retries do.
--
-- Deadlines (includes/deadline.lua): a release of a fire whose deadline
-- (ARGV[10]) comes before now + ms dead-letters it with the reason deadline
-- (and the consumer's error after it) instead of handing it back to be
-- delivered late. The deadline comes with the delivery ID, as Lease wrote
-- it, so that a release costs no read of the entry (an XRANGE of one entry
-- was a fifth of a release and its reclaim, callgrind); a caller that
-- gives none, or a wrong one, delivers no fire late: lease.lua checks the
-- entry's own deadline when it comes back. Op 'deadline' is a caller's own
-- verdict (a dispatcher's, by its estimate of the server's clock). Both
-- count dead_deadline in KEYS[7] (includes/counters.lua), whose type is
-- checked, and its writes probed, before the first write.
--
-- Phases (includes/probe.lua): reads and checks; probes; writes. A dead letter
-- probes XADD first, so that Redis refuses it under OOM before anything
-- changed (the lease then runs out, and Lease dead-letters it).

local err = check_type(KEYS[6], 'stream') or check_type(KEYS[8], 'stream')
if err then return err end

local group, id, attempt, op = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4]
local ms, lease, max_attempts = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
local cause, maxlen, deadline = ARGV[8], tonumber(ARGV[9]), tonumber(ARGV[10])

local p = redis.pcall('XPENDING', KEYS[6], group, id, id, 1)
if type(p) == 'table' and p.err then
  if string.find(p.err, 'NOGROUP', 1, true) then return {'notpending', ''} end
  return refusal(p.err, 'XPENDING', KEYS[6], 'read')
end
if #p == 0 then return {'notpending', ''} end
local owner, delivered = p[1][2], tonumber(p[1][4])
if delivered ~= attempt then return {'lost', fmt(delivered)} end

local now = now_ms()
if op == 'release' and deadline and now + ms > deadline then
  op, cause = 'deadline', deadline_cause(deadline, 'a redelivery', now + ms) .. '; last error: ' .. cause
end
if op == 'release' and attempt >= max_attempts then op = 'dead' end

if op ~= 'dead' and op ~= 'deadline' then
  -- The last delivery time that makes the lease run out ms from now; never
  -- in the future, which real Redis would take as now.
  local at = math.min(now + ms - lease, now)
  redis.call('XCLAIM', KEYS[6], group, owner, 0, id, 'TIME', fmt(at), 'RETRYCOUNT', fmt(delivered), 'JUSTID')
  return {op == 'extend' and 'extended' or 'released', fmt(now + ms)}
end

local found = redis.call('XRANGE', KEYS[6], id, id)
local counts = op == 'deadline' and #found > 0 and {dead_deadline = 1} or {}
if counts.dead_deadline then
  err = check_type(KEYS[7], 'hash')
  if err then return err end
end
err = probe_all({{'XADD', KEYS[8]}}) or counters_probes(counts)
if err then return err end
local r = redis.pcall('XACK', KEYS[6], group, '0-0')
if type(r) == 'table' and r.err then return refusal(r.err, 'XACK', KEYS[6]) end
if #found == 0 then
  redis.call('XACK', KEYS[6], group, id)
  return {'trimmed', ''}
end

-- The owner the pending entry list names: the consumer whose delivery
-- this was, as lease.lua records it.
local dead_id = dead_letter(found[1][2], cause, attempt, group, owner, id, maxlen)
redis.call('XACK', KEYS[6], group, id)
counters_write(counts)
return {op, dead_id}
