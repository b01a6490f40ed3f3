-- late_field (include): the counters' lateness bucket of one fire.
--
-- late_field returns the field of the counters hash (KEYS[7]) that counts
-- a fire late by late ms: late_le_<ms> for the first bound at or above
-- late, late_le_inf above the last. This chain is the one table of bounds
-- in Lua (no table is built per call); queue.LatenessBuckets mirrors it,
-- and queue's TestLatenessBucketsMatchScripts holds every script that
-- includes it to the Go bounds.
local function late_field(late)
  if late <= 1 then return 'late_le_1'
  elseif late <= 2 then return 'late_le_2'
  elseif late <= 5 then return 'late_le_5'
  elseif late <= 10 then return 'late_le_10'
  elseif late <= 25 then return 'late_le_25'
  elseif late <= 50 then return 'late_le_50'
  elseif late <= 100 then return 'late_le_100'
  elseif late <= 250 then return 'late_le_250'
  elseif late <= 500 then return 'late_le_500'
  elseif late <= 1000 then return 'late_le_1000'
  elseif late <= 2500 then return 'late_le_2500'
  elseif late <= 5000 then return 'late_le_5000'
  elseif late <= 10000 then return 'late_le_10000'
  elseif late <= 30000 then return 'late_le_30000'
  elseif late <= 60000 then return 'late_le_60000'
  elseif late <= 300000 then return 'late_le_300000'
  end
  return 'late_le_inf'
end
