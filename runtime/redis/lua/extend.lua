-- extend.lua — moves the lease of a record held under the token to now + lease; the native expiry
-- grows with it when needed and never shrinks.
-- KEYS[1] the record. ARGV: token, lease ms, retention grace ms. Answers 'OK' | 'NOOP'.
local k = KEYS[1]
local r = load(k)
if not r or r.st ~= 'p' or r.tok ~= ARGV[1] then return 'NOOP' end
local now = now_ms()
local lx = now + tonumber(ARGV[2])
local keep = math.max(lx, r.ex) - now + tonumber(ARGV[3])
local pttl = redis.call('PTTL', k)
if pttl > keep then keep = pttl end
redis.call('SET', k, 'idem/1 p ' .. lx .. ' ' .. r.ex .. ' ' .. r.tok .. ' ' .. r.fp .. ' 0\n', 'PX', tostring(keep))
return 'OK'
