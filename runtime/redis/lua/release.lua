-- release.lua — deletes the record held under the token and wakes its waiters.
-- KEYS[1] the record. ARGV: token, channel. Publishes "r <token>".
-- Answers 'OK' | 'MISSING' | 'DONE' | 'STOLEN' | a refusal.
local k = KEYS[1]
local r, refusal = load(k)
if r == false then return 'MISSING' end
if not r then return refusal end
if r.st ~= 'p' then return 'DONE' end
if r.tok ~= ARGV[1] then return 'STOLEN' end
redis.call('DEL', k)
redis.call('PUBLISH', ARGV[2], 'r ' .. ARGV[1])
return 'OK'
