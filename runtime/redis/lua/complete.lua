-- complete.lua — in progress under the token -> complete.
-- KEYS[1] the record. ARGV: token, ttl ms, retention grace ms, encoded payload, channel.
-- Publishes "c <token> <record>": a waiter that saw this token hold the record takes the
-- completion from the message, without another round trip.
-- Answers 'OK <completed at> <stored fingerprint or ->' | 'MISSING' | 'DONE' | 'STOLEN' | a refusal.
local k = KEYS[1]
local r, refusal = load(k)
if r == false then return 'MISSING' end
if not r then return refusal end
if r.st ~= 'p' then return 'DONE' end
if r.tok ~= ARGV[1] then return 'STOLEN' end
local now = now_ms()
local ttl = tonumber(ARGV[2])
local value = 'idem/1 c 0 ' .. (now + ttl) .. ' - ' .. r.fp .. ' ' .. now .. '\n' .. ARGV[4]
redis.call('SET', k, value, 'PX', tostring(ttl + tonumber(ARGV[3])))
redis.call('PUBLISH', ARGV[5], 'c ' .. ARGV[1] .. ' ' .. value)
return 'OK ' .. now .. ' ' .. r.fp
