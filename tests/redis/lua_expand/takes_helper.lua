-- A script taking the helper it calls, on the path that calls it: the build accepts it.
local v = redis.pcall('GET', KEYS[1])
if v then
  --@use held_by
  if not held_by(v, ARGV[1]) then return 'NOOP' end
end
return 'OK'
