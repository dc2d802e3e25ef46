-- acquire.lua — claim-or-replay in one round trip.
-- KEYS[1] the record. ARGV: token, lease ms, ttl ms, fingerprint ('-' = none), native expiry of a
-- claim in ms (max(lease, ttl) + retention grace, computed by the client), '1' when a replay should
-- carry its remaining ttl (the client's local cache needs it).
-- Answers 'A' acquired | 'T' acquired by taking over a lapsed lease | the complete record itself (or 'D<remaining ttl> ' .. record) |
-- 'B <remaining lease> <holder's token>' | 'M <stored fingerprint>' | a refusal of parse().
local k = KEYS[1]
local v = redis.pcall('GET', k)
-- The hot path, a replay. A complete record expires natively at the end of its ttl (complete.lua),
-- so one that GET returns is live: no clock read. A malformed header is returned as it is, and the
-- client refuses it as corrupt. (`v and` first: a claim finds no key, and skips the type test.)
if v and type(v) == 'string' and string.sub(v, 1, 9) == 'idem/2 c ' then
  if ARGV[4] ~= '-' then
    local fp = string.match(v, '^idem/2 c %d+ %d+ ([%x%-]+)\n')
    if fp and fp ~= '-' and fp ~= ARGV[4] then return 'M ' .. fp end
  end
  if ARGV[6] == '1' then
    local left = redis.call('PTTL', k)
    if left > 0 then return 'D' .. left .. ' ' .. v end
  end
  return v
end
--@use now_text
local stamp = now_text()
local answer = 'A'
if v ~= false then
  local now = tonumber(stamp)
  --@use parse
  local r, refusal = parse(v)
  if not r then return refusal end
  if r.st == 'p' then
    if r.tok == ARGV[1] then return 'A' end
    if r.lx > now then return 'B ' .. (r.lx - now) .. ' ' .. r.tok end
    answer = 'T'  -- the lease ran out: a steal
  end
end
redis.call('SET', k,
           'idem/2 p ' .. stamp .. ' ' .. stamp .. ' ' .. ARGV[2] .. ' ' .. ARGV[3] .. ' ' .. ARGV[4] .. ' ' ..
               ARGV[1] .. '\n',
           'PX', ARGV[5])
return answer
