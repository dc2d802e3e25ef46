-- acquire.lua — claim-or-replay in one round trip.
-- KEYS[1] the record. ARGV: token, lease ms, ttl ms, fingerprint ('-' = none), retention grace ms,
-- '1' when a replay should carry its remaining ttl (the client's local cache needs it).
-- Answers 'A' acquired | the complete record itself (or 'D<remaining ttl> ' .. record) |
-- 'B <remaining lease> <holder's token>' | 'M <stored fingerprint>' | a refusal of parse().
local k = KEYS[1]
local v = redis.pcall('GET', k)
local now = now_ms()
if v ~= false then
  -- The hot path, a replay, with the one field it needs; parse() reads every other case.
  local ex = type(v) == 'string' and string.match(v, '^idem/1 c %d+ (%d+) ')
  if ex and tonumber(ex) > now then
    if ARGV[4] ~= '-' then
      local fp = string.match(v, '^idem/1 c %d+ %d+ %S+ (%S+) ')
      if fp ~= '-' and fp ~= ARGV[4] then return 'M ' .. fp end
    end
    if ARGV[6] == '1' then return 'D' .. (tonumber(ex) - now) .. ' ' .. v end
    return v
  end
  local r, refusal = parse(v)
  if not r then return refusal end
  if r.st == 'p' then
    if r.tok == ARGV[1] then return 'A' end
    if r.lx > now then return 'B ' .. (r.lx - now) .. ' ' .. r.tok end
  end
  -- A complete record past its ttl, or a lease that ran out: claim afresh (a steal).
end
local lease, ttl = tonumber(ARGV[2]), tonumber(ARGV[3])
redis.call('SET', k, 'idem/1 p ' .. (now + lease) .. ' ' .. (now + ttl) .. ' ' .. ARGV[1] .. ' ' .. ARGV[4] .. ' 0\n',
           'PX', tostring(math.max(lease, ttl) + tonumber(ARGV[5])))
return 'A'
