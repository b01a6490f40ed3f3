-- fmt (include): format a number as an integer string.
--
-- Numbers are formatted with '%.0f', never tostring or '..': real Redis
-- prints Lua numbers with %.14g, which would corrupt a 15-digit millisecond
-- timestamp (any instant after 2286).
local function fmt(n)
  return string.format('%.0f', n)
end
