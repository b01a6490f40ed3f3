-- fmt (include): format a number as an integer string.
--
-- Numbers are formatted with '%d', never tostring or '..': real Redis
-- prints Lua numbers with %.14g, which would corrupt a 15-digit millisecond
-- timestamp (any instant after 2286). '%d' formats a C long, 64 bits on
-- every platform Redis runs on, so every integer a script holds (below
-- 2^53) comes out exact; and unlike '%.0f', which goes through the C
-- library's floating-point printer, it costs a claim a few hundred
-- instructions per number rather than a few thousand (BENCHMARKS.md,
-- "Where a claim's instructions go"). Only integers are formatted.
local function fmt(n)
  -- The counts of a small claim, without a C call.
  if n == 1 then return '1' elseif n == 0 then return '0' end
  return string.format('%d', n)
end
