#!/usr/bin/env bash
# tests/http/sample_session.sh — drives idem_sample_payments with curl over loopback.
#
#   sample_session.sh <idem_sample_payments> <store> [restart]
#   IDEM_SAMPLE_SERVER=beast sample_session.sh ...      (the same walk against --server beast)
#
# <store> is what --store takes; `postgres:@<file>` and `redis:@<file>` read the conninfo or the
# address from a fixture's file. Checks a first call, a replay (same id, Idempotent-Replayed), a
# changed body (422), a missing and an invalid key (400, the key never echoed), a concurrent
# duplicate (one 201, one 409 with Retry-After), GET /metrics; with `restart`, stops the sample, starts it again
# on the same store and checks that the first key replays the same payment without creating one.
set -euo pipefail

sample=$1
store=$2
mode=${3:-}

case "$store" in
  postgres:@*) store="postgres:$(cat "${store#postgres:@}")" ;;
  redis:@*) store="redis:$(cat "${store#redis:@}")" ;;
esac

work=$(mktemp -d /tmp/idem-http-session.XXXXXXXX)
pid=""
cleanup() {
  if [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null; then kill -TERM "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

fail() {
  echo "sample_session.sh: FAILED: $*" >&2
  echo "--- sample stderr:" >&2
  cat "$work/stderr" >&2 2>/dev/null || true
  exit 1
}

# Starts the sample and sets $pid and $port from its first line (bounded: 60 s).
start_sample() {
  rm -f "$work/out"
  mkfifo "$work/out"
  "$sample" --port 0 --store "$store" ${IDEM_SAMPLE_SERVER:+--server "$IDEM_SAMPLE_SERVER"} >"$work/out" 2>>"$work/stderr" &
  pid=$!
  local line=""
  exec 3<"$work/out"
  IFS= read -r -t 60 line <&3 || fail "no first line from the sample"
  [[ "$line" =~ ^listening\ on\ 127\.0\.0\.1:([0-9]+)$ ]] || fail "unexpected first line: $line"
  port=${BASH_REMATCH[1]}
  # Keep draining stdout so the sample never blocks on a full pipe.
  cat <&3 >/dev/null &
  exec 3<&-
}

stop_sample() {
  kill -TERM "$pid"
  wait "$pid" || true
  pid=""
}

# post <key-header-or-empty> <body> → sets $status, $headers, $body
post() {
  local key=$1 data=$2
  local args=(-sS --max-time 60 -o "$work/body" -D "$work/headers" -w '%{http_code}' -X POST
              -H 'Content-Type: application/json' --data-binary "$data" "http://127.0.0.1:$port/payments")
  [[ -n "$key" ]] && args+=(-H "Idempotency-Key: $key")
  status=$(curl "${args[@]}")
  headers=$(tr -d '\r' <"$work/headers")
  body=$(cat "$work/body")
}

header() { grep -i "^$1:" <<<"$headers" | head -n 1 | cut -d' ' -f2- || true; }

count() { curl -sS --max-time 60 "http://127.0.0.1:$port/payments" | sed -E 's/.*"count":([0-9]+).*/\1/'; }

run_id="$(date +%s%N)-$RANDOM"
key1="\"first-$run_id\""
start_sample

post "$key1" '{"amount": 1200, "currency": "EUR"}'
[[ "$status" == 201 ]] || fail "first call: status $status"
id=$(sed -E 's/.*"id":"([^"]+)".*/\1/' <<<"$body")
[[ "$(header Location)" == "/payments/$id" ]] || fail "first call: Location $(header Location) for $id"
[[ -z "$(header Idempotent-Replayed)" ]] || fail "first call carries the replay marker"
first_body=$body

post "first-$run_id" '{"amount": 1200, "currency": "EUR"}'  # unquoted: the same key
[[ "$status" == 201 && "$(header Idempotent-Replayed)" == true && "$body" == "$first_body" ]] ||
  fail "replay: status $status, marker '$(header Idempotent-Replayed)', body $body"
[[ "$(header Location)" == "/payments/$id" ]] || fail "replay lost Location"
[[ "$(count)" == 1 ]] || fail "a replay created a payment"

post "$key1" '{"amount": 9999, "currency": "EUR"}'
[[ "$status" == 422 && "$(header Content-Type)" == application/problem+json* ]] || fail "changed body: $status"

post "" '{"amount": 1, "currency": "EUR"}'
[[ "$status" == 400 && "$(header Content-Type)" == application/problem+json* ]] || fail "missing key: $status"

post "\"bad-$run_id" '{"amount": 1, "currency": "EUR"}'
[[ "$status" == 400 ]] || fail "invalid key: $status"
[[ "$body$headers" != *"bad-$run_id"* ]] || fail "the invalid key was echoed"

post "\"json-$run_id\"" 'not json'
[[ "$status" == 400 && "$body" == *'Invalid payment'* ]] || fail "the handler's own 400: $status $body"

# Keep-alive: twelve requests in one curl run share one connection (cpp-httplib's default would
# close it after five).
urls=()
for i in $(seq 1 12); do urls+=("http://127.0.0.1:$port/payments"); done
connects=$(curl -sSv --max-time 60 -o /dev/null "${urls[@]}" 2>&1 | grep -c '^\* Connected to' || true)
[[ "$connects" == 1 ]] || fail "twelve requests took $connects connections"

# A concurrent duplicate: both requests carry the same key and body; the endpoint has
# waitTimeout PT0S, so whichever claims second gets 409 + Retry-After while the other runs.
key2="\"dup-$run_id\""
slow='{"amount": 5, "currency": "EUR", "delay_ms": 5000}'
before=$(count)
( post "$key2" "$slow"; echo "$status $(header Retry-After)" >"$work/a" ) &
a=$!
( post "$key2" "$slow"; echo "$status $(header Retry-After)" >"$work/b" ) &
b=$!
wait "$a" "$b"
answers=$(sort <(cut -d' ' -f1 "$work/a") <(cut -d' ' -f1 "$work/b") | tr '\n' ' ')
[[ "$answers" == "201 409 " ]] || fail "concurrent duplicate: answers $answers"
retry=$(grep -h '^409' "$work/a" "$work/b" | cut -d' ' -f2)
[[ "$retry" =~ ^[1-9][0-9]*$ ]] || fail "409 without a Retry-After in whole seconds: '$retry'"
[[ "$(count)" == $((before + 1)) ]] || fail "the duplicate created a payment"

# GET /metrics: the walk so far in Prometheus' text format (the first call, the concurrent one
# that ran, the handler's own 400; one replay; one in flight), and no key in it.
metrics=$(curl -sS --max-time 60 -D "$work/metrics.headers" "http://127.0.0.1:$port/metrics")
grep -qi '^Content-Type: text/plain; version=0.0.4' "$work/metrics.headers" || fail "/metrics content type"
calls() { grep -E "^idem_calls_total\{scope=\"PaymentController.create\",outcome=\"$1\"\} " <<<"$metrics" | cut -d' ' -f2; }
[[ "$(calls replayed) $(calls in_flight) $(calls failed)" == "1 1 0" ]] ||
  fail "/metrics: replayed $(calls replayed), in flight $(calls in_flight), failed $(calls failed)"
[[ "$metrics" != *"$run_id"* ]] || fail "a key appears in /metrics"

if [[ "$mode" == restart ]]; then
  stop_sample
  start_sample
  [[ "$(count)" == 0 ]] || fail "a fresh process should have created nothing"
  post "$key1" '{"amount": 1200, "currency": "EUR"}'
  [[ "$status" == 201 && "$(header Idempotent-Replayed)" == true && "$body" == "$first_body" ]] ||
    fail "replay after restart: status $status, body $body"
  [[ "$(count)" == 0 ]] || fail "the replay after restart ran the handler again"
fi
echo "sample_session.sh: all checks passed on ${store%%:*}${mode:+ ($mode)}${IDEM_SAMPLE_SERVER:+, server $IDEM_SAMPLE_SERVER}"
