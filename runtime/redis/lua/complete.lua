-- complete.lua — in progress under the token -> complete.
-- KEYS[1] the record. ARGV: token, ttl ms, retention grace ms, encoded payload, channel.
-- Publishes "c <token> <record>": a waiter that saw this token hold the record takes the
-- completion from the message, without another round trip.
-- Returns {'OK', completed_at, stored fingerprint or '-'} | {'MISSING'} | {'DONE'} | {'STOLEN'} |
-- {'F'|'V'|'C', detail}.
local k = KEYS[1]
local r, bad, detail = load_header(k)
if bad then return {bad, detail} end
if not r then return {'MISSING'} end
if r.st ~= 'p' then return {'DONE'} end
if r.tok ~= ARGV[1] then return {'STOLEN'} end
local now = now_ms()
local ttl = tonumber(ARGV[2])
local value = header('c', 0, now + ttl, '-', r.fp, int(now)) .. ARGV[4]
redis.call('SET', k, value, 'PX', int(ttl + tonumber(ARGV[3])))
redis.call('PUBLISH', ARGV[5], 'c ' .. ARGV[1] .. ' ' .. value)
return {'OK', now, r.fp}
