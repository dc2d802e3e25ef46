-- complete.lua — in progress under the token -> complete.
-- KEYS[1] the record. ARGV: token, ttl ms, native expiry in ms (the ttl itself, at least 1: a
-- complete record expires natively at its logical expiry, so a replay needs no clock read), encoded
-- payload, channel, the publish command (PUBLISH, or SPUBLISH in a Redis Cluster: the channel shares
-- the record's hash tag, so the script stays on one slot).
-- Publishes "c <token> <record>": a waiter that saw this token hold the record takes the
-- completion from the message, without another round trip.
-- Answers 'OK <completed at> <stored fingerprint or ->' | 'MISSING' | 'DONE' | 'STOLEN' | a refusal.
local k = KEYS[1]
local v = redis.pcall('GET', k)
--@use held_by
if not held_by(v, ARGV[1]) then
  --@use not_held
  return not_held(v)
end
local fp = string.match(v, '^idem/2 p %d+ %d+ %d+ %d+ ([%x%-]+) ')
if not fp then return 'C header' end
--@use now_text
local stamp = now_text()
local value = 'idem/2 c ' .. stamp .. ' ' .. ARGV[2] .. ' ' .. fp .. '\n' .. ARGV[4]
redis.call('SET', k, value, 'PX', ARGV[3])
redis.call(ARGV[6], ARGV[5], 'c ' .. ARGV[1] .. ' ' .. value)
return 'OK ' .. stamp .. ' ' .. fp
