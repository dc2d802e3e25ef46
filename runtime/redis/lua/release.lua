-- release.lua — deletes the record held under the token and wakes its waiters.
-- KEYS[1] the record. ARGV: token, channel, the publish command (PUBLISH or SPUBLISH, as in
-- complete.lua). Publishes "r <token>".
-- Answers 'OK' | 'MISSING' | 'DONE' | 'STOLEN' | a refusal.
local k = KEYS[1]
local v = redis.pcall('GET', k)
--@use held_by
if not held_by(v, ARGV[1]) then
  --@use not_held
  return not_held(v)
end
redis.call('DEL', k)
redis.call(ARGV[3], ARGV[2], 'r ' .. ARGV[1])
return 'OK'
