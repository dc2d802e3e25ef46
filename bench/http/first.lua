-- bench/http/first.lua — every request a first call: a new Idempotency-Key per request.
-- wrk ... -s first.lua <url> -- <path> <run-id>
local threads = 0
function setup(thread)
  thread:set("tid", threads)
  threads = threads + 1
end
function init(args)
  path = args[1]
  prefix = (args[2] or "run") .. "-" .. tostring(tid) .. "-"
  n = 0
  body = '{"amount": 1200, "currency": "EUR"}'
end
function request()
  n = n + 1
  return wrk.format("POST", path, {["Content-Type"] = "application/json", ["Idempotency-Key"] = prefix .. n}, body)
end
