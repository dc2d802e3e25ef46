-- common.lua — prepended to every idem script (runtime/redis/CMakeLists.txt embeds them).
--
-- A record is one string value: a header line, then (once complete) the payload as the client
-- encoded it, which the scripts never look into:
--
--   idem/1 <st> <lx> <ex> <tok> <fp> <ca>\n<payload>
--
-- st: p (in progress) | c (complete); lx: lease expiry; ex: logical expiry; tok: lease token
-- ('-' once complete); fp: request fingerprint ('-' = none); ca: completed at ('0' while in
-- progress). Times are Redis TIME in milliseconds since the epoch. A value that does not start
-- with "idem/" was not written by idem. One string (not a hash) keeps every script to one read and
-- one write, and SET ... PX sets the native expiry in the same command.
--
-- Every script answers with one flat string (purge: an integer), never a table: turning a Lua
-- table into a Redis reply costs about as much server time as the rest of a replay
-- (docs/bench-redis.md). Numbers become text through `..` or tostring(), which print an integral
-- Lua number below 1e14 as plain digits; the store caps every duration at about a century, so times
-- stay below 1e13. (A number passed to redis.call as a number would be formatted by Redis, whose
-- format has changed between versions.)
--
-- Needs Redis >= 5, which replicates a script's effects (not the script), so writes may follow TIME.

local function now_ms()
  local t = redis.call('TIME')
  return t[1] * 1000 + math.floor(t[2] / 1000)
end

-- parse(v) -> record | nil, refusal
-- v is what GET or GETRANGE answered through redis.pcall. The refusal is the script's answer:
-- 'F' the key holds data idem did not write (another type, or a string not starting "idem/");
-- 'V <version>' an unknown format version; 'C header' a malformed header.
local function parse(v)
  if type(v) ~= 'string' then return nil, 'F' end
  local st, lx, ex, tok, fp, ca = string.match(v, '^idem/1 ([pc]) (%d+) (%d+) ([%x%-]+) ([%x%-]+) (%d+)\n')
  if st then return {st = st, lx = tonumber(lx), ex = tonumber(ex), tok = tok, fp = fp, ca = ca} end
  if string.sub(v, 1, 5) ~= 'idem/' then return nil, 'F' end
  local version = string.match(v, '^idem/(%d+) ')
  if version and version ~= '1' then return nil, 'V ' .. version end
  return nil, 'C header'
end

-- The record at k: record | false (absent) | nil, refusal. A whole GET: used where the record is
-- expected in progress, which carries no payload.
local function load(k)
  local v = redis.pcall('GET', k)
  if v == false then return false end
  return parse(v)
end
