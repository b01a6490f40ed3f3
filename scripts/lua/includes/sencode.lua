-- sencode (include): write a schedule record.
-- includes: fmt
--
local function sencode(v, st, cnt, last, armed, overlap, body)
  return fmt(v) .. ':' .. st .. ':' .. fmt(cnt) .. ':' .. last .. ':' .. armed .. ':' .. overlap .. ':' .. body
end
