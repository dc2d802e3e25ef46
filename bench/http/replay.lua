-- bench/http/replay.lua — every request but the first of each connection a replay: one key per thread.
-- wrk ... -s replay.lua <url> -- <path> <run-id>
local threads = 0
function setup(thread)
  thread:set("tid", threads)
  threads = threads + 1
end
function init(args)
  path = args[1]
  key = '"replay-' .. (args[2] or "run") .. "-" .. tostring(tid) .. '"'
  body = '{"amount": 1200, "currency": "EUR"}'
end
function request()
  return wrk.format("POST", path, {["Content-Type"] = "application/json", ["Idempotency-Key"] = key}, body)
end
