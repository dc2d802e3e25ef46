-- extend.lua — moves the lease of a record held under the token to now + lease; the native expiry
-- grows with it when needed and never shrinks.
-- KEYS[1] the record. ARGV: token, lease ms, retention grace ms. Answers 'OK' | 'NOOP'.
local k = KEYS[1]
local v = redis.pcall('GET', k)
--@use held_by
--@use parse
--@use now_text
if not held_by(v, ARGV[1]) then return 'NOOP' end
local r = parse(v)
if not r then return 'NOOP' end
local stamp = now_text()
local now = tonumber(stamp)
local lease = tonumber(ARGV[2])
local keep = math.max(now + lease, r.ex) - now + tonumber(ARGV[3])
local pttl = redis.call('PTTL', k)
if pttl > keep then keep = pttl end
redis.call('SET', k,
           'idem/2 p ' .. r.claimed .. ' ' .. stamp .. ' ' .. ARGV[2] .. ' ' .. r.ttl .. ' ' .. r.fp .. ' ' .. r.tok ..
               '\n',
           'PX', tostring(keep))
return 'OK'
