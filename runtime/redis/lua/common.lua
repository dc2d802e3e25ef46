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

-- Needs Redis >= 5, which replicates a script's effects (not the script), so writes may follow TIME.

local function now_ms()
  local t = redis.call('TIME')
  return t[1] * 1000 + math.floor(t[2] / 1000)
end

-- An integer as a decimal string without exponent.
local function int(x)
  return string.format('%.0f', x)
end

local function header(st, lx, ex, tok, fp, ca)
  return 'idem/1 ' .. st .. ' ' .. int(lx) .. ' ' .. int(ex) .. ' ' .. tok .. ' ' .. fp .. ' ' .. ca .. '\n'
end

-- parse(v) -> record | nil (absent) | nil, code, detail
-- code: 'F' the key holds data idem did not write; 'V' an unknown format version; 'C' malformed.
local function parse(v)
  if type(v) == 'table' then return nil, 'F', '' end  -- WRONGTYPE: not a string
  if not v then return nil end
  if string.sub(v, 1, 5) ~= 'idem/' then return nil, 'F', '' end
  local st, lx, ex, tok, fp, ca = string.match(v, '^idem/1 ([pc]) (%d+) (%d+) ([%x%-]+) ([%x%-]+) (%d+)\n')
  if not st then
    local version = string.match(v, '^idem/(%d+) ')
    if version and version ~= '1' then return nil, 'V', version end
    return nil, 'C', 'header'
  end
  return {st = st, lx = tonumber(lx), ex = tonumber(ex), tok = tok, fp = fp, ca = ca, v = v}
end

-- The whole record (for a replay).
local function load(k)
  return parse(redis.pcall('GET', k))
end

-- Its header only: a complete record's payload may be large and is not needed.
local function load_header(k)
  local v = redis.pcall('GETRANGE', k, 0, 1023)
  if v == '' then  -- GETRANGE answers '' for a missing key and for an empty string alike
    if redis.call('EXISTS', k) == 0 then return nil end
    return nil, 'F', ''
  end
  return parse(v)
end

