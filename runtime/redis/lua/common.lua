-- common.lua — the record format every idem script shares, and the helpers a script takes where it
-- needs them: a line `--@use <name>` in a script becomes the helper after `--@helper <name>` below
-- (expand.cmake; runtime/redis/CMakeLists.txt embeds the expanded scripts); a helper that needs
-- another takes it the same way. A helper is a closure made on every call of the script that reaches
-- it, so a script's hot path takes only what it calls.
--
-- A record is one string value: a header line, then (once complete) the payload as the client
-- encoded it, which the scripts never look into:
--
--   idem/2 p <claimed at> <lease from> <lease ms> <ttl ms> <fingerprint> <token>\n
--   idem/2 c <completed at> <ttl ms> <fingerprint>\n<payload>
--
-- Times are Redis TIME in milliseconds since the epoch, durations milliseconds. An in-progress
-- record expires at claimed at + ttl and its lease at lease from + lease (extend moves lease
-- from); a complete one expires at completed at + ttl, which is also its native expiry (SET PX
-- ttl), so a complete record that GET returns is live. The fingerprint is hex, '-' for none; the
-- token 32 hex digits, last, so a holder is recognised by the record's end. A value that does not
-- start with "idem/" was not written by idem. One string (not a hash) keeps every script to one
-- read and one write, and SET ... PX sets the native expiry in the same command.
--
-- Why times and durations are stored apart, and every script answers with one flat string (purge:
-- an integer), never a table: Lua work is the server cost of a round trip. Storing the clock's
-- digits and the client's durations as they come means no script formats a number on the way to a
-- claim, a completion or a replay; the client computes the native expiries (PX) itself; and
-- turning a Lua table into a Redis reply costs about as much as the rest of a replay
-- (docs/bench-redis.md has the measurements).
--
-- Needs Redis >= 5, which replicates a script's effects (not the script), so writes may follow TIME.

--@helper now_text
-- Redis TIME in milliseconds since the epoch, as its 13 digits (made without formatting a number);
-- tonumber() of it is the number. A script that only stores the time (a claim of a free key, a
-- completion) never converts it.
local function now_text()
  local t = redis.call('TIME')
  return t[1] .. string.sub('00000' .. t[2], -6, -4)
end

--@helper parse
-- parse(v) -> record | nil, refusal
-- v is what GET or GETRANGE answered through redis.pcall. A record has st, ex, fp, and for 'p'
-- also lx and tok. The refusal is the script's answer: 'F' the key holds data idem did not write
-- (another type, or a string not starting "idem/"); 'V <version>' an unknown format version;
-- 'C header' a malformed header.
local function parse(v)
  if type(v) ~= 'string' then return nil, 'F' end
  local ca, ttl, fp = string.match(v, '^idem/2 c (%d+) (%d+) ([%x%-]+)\n')
  if ca then return {st = 'c', ex = tonumber(ca) + tonumber(ttl), fp = fp} end
  local cl, lf, lease, ttl2, fp2, tok = string.match(v, '^idem/2 p (%d+) (%d+) (%d+) (%d+) ([%x%-]+) (%x+)\n')
  if cl then
    return {st = 'p', ex = tonumber(cl) + tonumber(ttl2), lx = tonumber(lf) + tonumber(lease), fp = fp2, tok = tok,
            claimed = cl, ttl = ttl2}
  end
  if string.sub(v, 1, 5) ~= 'idem/' then return nil, 'F' end
  local version = string.match(v, '^idem/(%d+) ')
  if version and version ~= '2' then return nil, 'V ' .. version end
  return nil, 'C header'
end

--@helper held_by
-- True when v is an in-progress record held under `token`: its header ends with the token.
local function held_by(v, token)
  return type(v) == 'string' and string.sub(v, 1, 9) == 'idem/2 p ' and string.sub(v, -34) == ' ' .. token .. '\n'
end

--@helper not_held
--@use parse
-- Why a record is not held under the caller's token: 'MISSING' | 'DONE' | 'STOLEN' | a refusal.
local function not_held(v)
  if v == false then return 'MISSING' end
  local r, refusal = parse(v)
  if not r then return refusal end
  if r.st ~= 'p' then return 'DONE' end
  return 'STOLEN'
end
