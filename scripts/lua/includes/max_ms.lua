-- max_ms (include): the latest time timerq stores.
--
-- MAX_MS is 9999-12-31T23:59:59.999Z, the latest time timerq stores
-- (queue.ValidateDue); exact in a double.
local MAX_MS = 253402300799999
