-- release.lua — deletes the record held under the token and wakes its waiters.
-- KEYS[1] the record. ARGV: token, channel. Publishes "r <token>".
-- Returns {'OK'} | {'MISSING'} | {'DONE'} | {'STOLEN'} | {'F'|'V'|'C', detail}.
local k = KEYS[1]
local r, bad, detail = load_header(k)
if bad then return {bad, detail} end
if not r then return {'MISSING'} end
if r.st ~= 'p' then return {'DONE'} end
if r.tok ~= ARGV[1] then return {'STOLEN'} end
redis.call('DEL', k)
redis.call('PUBLISH', ARGV[2], 'r ' .. ARGV[1])
return {'OK'}
