-- purge.lua — deletes the expired records among KEYS that idem owns and nobody holds: a complete
-- record past its ttl, an in-progress one past both its ttl and its lease. Foreign, unknown and
-- malformed keys are skipped. Reads headers only (GETRANGE): a complete record's payload may be
-- large and is not needed. ARGV[1]: how many bytes hold the longest header a valid record can
-- have (max_header_length in record_codec.hpp, from the limits on fingerprints and numbers).
-- Answers how many it deleted.
--@use now_text
--@use parse
local now = tonumber(now_text())
local last = tonumber(ARGV[1]) - 1
local n = 0
for _, k in ipairs(KEYS) do
  local r = parse(redis.pcall('GETRANGE', k, 0, last))
  if r and r.ex <= now and (r.st == 'c' or r.lx <= now) then
    redis.call('DEL', k)
    n = n + 1
  end
end
return n
