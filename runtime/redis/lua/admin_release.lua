-- admin_release.lua — an operator frees an in-progress record (idem-admin release): deletes it
-- when its lease has lapsed, or whatever its lease when ARGV[1] is '1', and wakes its waiters
-- like release.lua. A complete record is never deleted: the check and the delete are one step.
-- KEYS[1] the record. ARGV: '1' to end a live lease too, channel, the publish command.
-- Answers 'OK' | 'MISSING' | 'DONE' | 'LIVE' | a refusal of parse().
local k = KEYS[1]
local v = redis.pcall('GET', k)
--@use parse
--@use now_text
if v == false then return 'MISSING' end
local r, refusal = parse(v)
if not r then return refusal end
if r.st ~= 'p' then return 'DONE' end
if ARGV[1] ~= '1' and r.lx > tonumber(now_text()) then return 'LIVE' end
redis.call('DEL', k)
redis.call(ARGV[3], ARGV[2], 'r ' .. r.tok)
return 'OK'
