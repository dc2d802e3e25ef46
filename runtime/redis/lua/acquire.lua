-- acquire.lua — claim-or-replay in one round trip.
-- KEYS[1] the record. ARGV: token, lease ms, ttl ms, fingerprint ('-' = none), retention grace ms.
-- Returns {'A'} acquired | {'D', remaining ttl, record} complete | {'B', remaining lease, holder's
-- token} held by another token | {'M', stored fingerprint} | {'F'|'V'|'C', detail}.
-- The replay path is written out inline: it is the hottest path of the store.
local k = KEYS[1]
local now = now_ms()
local v = redis.pcall('GET', k)
if v then
  if type(v) ~= 'string' then return {'F', ''} end
  local st, lx, ex, tok, fp = string.match(v, '^idem/1 ([pc]) (%d+) (%d+) ([%x%-]+) ([%x%-]+) %d+\n')
  if not st then
    local _, code, detail = parse(v)
    return {code, detail}
  end
  ex = tonumber(ex)
  if st == 'c' then
    if ex > now then
      local want = ARGV[4]
      if want ~= '-' and fp ~= '-' and fp ~= want then return {'M', fp} end
      return {'D', ex - now, v}
    end
  elseif tok == ARGV[1] then
    return {'A'}
  else
    lx = tonumber(lx)
    if lx > now then return {'B', lx - now, tok} end
  end
  -- A complete record past its ttl, or a lease that ran out: claim afresh (a steal).
end
local lease, ttl = tonumber(ARGV[2]), tonumber(ARGV[3])
redis.call('SET', k, header('p', now + lease, now + ttl, ARGV[1], ARGV[4], '0'), 'PX',
           int(math.max(lease, ttl) + tonumber(ARGV[5])))
return {'A'}
