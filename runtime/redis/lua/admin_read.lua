-- admin_read.lua — an operator's look at one record (idem-admin): the store's clock and the value.
-- KEYS[1] the record. ARGV[1]: how many bytes to read, '0' for the whole value (a listing reads
-- the header and the payload's first bytes only; an inspection with the payload reads it all).
-- Answers 'N <now ms>' (no such key) | 'R <now ms>\n' .. the bytes | 'F' (not a string).
local v
if ARGV[1] == '0' then
  v = redis.pcall('GET', KEYS[1])
else
  v = redis.pcall('GETRANGE', KEYS[1], 0, tonumber(ARGV[1]) - 1)
end
--@use now_text
local now = now_text()
if v == false then return 'N ' .. now end
if type(v) ~= 'string' then return 'F' end
if v == '' then return 'N ' .. now end
return 'R ' .. now .. '\n' .. v
