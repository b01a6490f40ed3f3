-- encode (include): write a timer record.
--
-- A record is "<state>:<due_ms>:<created_ms>:<settled_ms>:<payload>", state
-- being s (scheduled), f (fired) or c (cancelled). While scheduled, due_ms
-- and settled_ms are empty: the due time lives only in the due set, which
-- saves 16 bytes per pending timer and lets reschedule touch one key. The
-- payload goes last so it may hold any bytes.
local function encode(state, due, created, settled, payload)
  return state .. ':' .. due .. ':' .. created .. ':' .. settled .. ':' .. payload
end
