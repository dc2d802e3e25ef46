#!/usr/bin/env bash
# tests/metrics/prometheus_scrape.sh — the payments sample's /metrics read by a real Prometheus.
#
#   prometheus_scrape.sh <idem_sample_payments>
#
# Starts the sample on a SQLite store in a temporary directory and drives a known workload with
# curl: 3 first calls, 2 replays, a key reused for another body, and a concurrent duplicate (one runs, one is answered in flight).
# `promtool check metrics` must accept the exposition. Then it starts Debian's prometheus on
# 127.0.0.1, scraping the sample every second, and asks its HTTP API (/api/v1/query) for the
# series: each must have exactly the expected value. prometheus and promtool must be installed
# (scripts/install-deps.sh); without them the test fails.
set -euo pipefail

sample=$1
source "$(dirname "$0")/../support/ports.sh"

work=$(mktemp -d /tmp/idem-prometheus.XXXXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do
    kill -TERM "$p" 2>/dev/null || true
    wait "$p" 2>/dev/null || true
  done
  rm -rf "$work"
}
trap cleanup EXIT

fail() {
  echo "prometheus_scrape.sh: FAILED: $*" >&2
  for log in sample.err prometheus.log; do
    [[ -s "$work/$log" ]] && { echo "--- $log:" >&2; tail -n 30 "$work/$log" >&2; }
  done
  exit 1
}

command -v prometheus >/dev/null || fail "prometheus is not installed (scripts/install-deps.sh installs it)"
command -v promtool >/dev/null || fail "promtool is not installed (scripts/install-deps.sh installs it)"

# The sample, on a free port it reports in its first line (bounded: 60 s).
mkfifo "$work/out"
"$sample" --port 0 --store "sqlite:$work/records.db" >"$work/out" 2>"$work/sample.err" &
pids+=($!)
exec 3<"$work/out"
IFS= read -r -t 60 line <&3 || fail "no first line from the sample"
[[ "$line" =~ ^listening\ on\ 127\.0\.0\.1:([0-9]+)$ ]] || fail "unexpected first line: $line"
port=${BASH_REMATCH[1]}
cat <&3 >/dev/null &
pids+=($!)
exec 3<&-

post() {  # key body -> prints the status
  curl -sS --max-time 60 -o /dev/null -w '%{http_code}' -X POST -H 'Content-Type: application/json' \
    -H "Idempotency-Key: \"$1\"" --data-binary "$2" "http://127.0.0.1:$port/payments"
}

run_id="$(date +%s%N)-$RANDOM"
order='{"amount": 700, "currency": "EUR"}'
for k in one two three; do
  [[ "$(post "$k-$run_id" "$order")" == 201 ]] || fail "first call $k"
done
for k in one two; do
  [[ "$(post "$k-$run_id" "$order")" == 201 ]] || fail "replay $k"
done
# The same key with another body: the fingerprints differ, 422.
[[ "$(post "one-$run_id" '{"amount": 701, "currency": "EUR"}')" == 422 ]] || fail "reused key"
# waitTimeout PT0S on the endpoint: whichever claims second is answered 409 while the other runs.
slow='{"amount": 5, "currency": "EUR", "delay_ms": 3000}'
post "dup-$run_id" "$slow" >"$work/a" &
a=$!
post "dup-$run_id" "$slow" >"$work/b" &
b=$!
wait "$a" "$b"
answers=$(sort "$work/a" "$work/b" | tr '\n' ' ')
[[ "$answers" == "201 409 " ]] || fail "concurrent duplicate: answers $answers"

# The exposition itself: status, content type, promtool's checks, no key anywhere.
curl -sS --max-time 60 -D "$work/headers" -o "$work/metrics.txt" "http://127.0.0.1:$port/metrics"
grep -qi '^Content-Type: text/plain; version=0.0.4' "$work/headers" || fail "content type: $(cat "$work/headers")"
promtool check metrics <"$work/metrics.txt" >"$work/promtool.out" 2>&1 ||
  fail "promtool check metrics: $(cat "$work/promtool.out")"
! grep -q "$run_id" "$work/metrics.txt" || fail "a key appears in /metrics"

# Prometheus, scraping the sample every second.
prom_port=$(pick_port prometheus_scrape.sh)
cat >"$work/prometheus.yml" <<YAML
global:
  scrape_interval: 1s
scrape_configs:
  - job_name: idem
    static_configs:
      - targets: ["127.0.0.1:$port"]
YAML
prometheus --config.file="$work/prometheus.yml" --storage.tsdb.path="$work/data" \
  --web.listen-address="127.0.0.1:$prom_port" --log.level=warn >"$work/prometheus.log" 2>&1 &
pids+=($!)

# query <PromQL> -> prints the single sample's value, or nothing while there is none.
query() {
  curl -sS --max-time 10 -G "http://127.0.0.1:$prom_port/api/v1/query" --data-urlencode "query=$1" 2>/dev/null |
    sed -nE 's/.*"value":\[[0-9.e+]+,"([^"]*)"\].*/\1/p'
}

# The workload ended before Prometheus started, so its first scrape holds the final values.
deadline=$((SECONDS + 90))
until [[ "$(query 'up{job="idem"}')" == 1 && -n "$(query 'sum(idem_calls_total)')" ]]; do
  (( SECONDS < deadline )) || fail "Prometheus did not scrape the sample within 90 s"
  sleep 0.5
done

expect() {  # PromQL expected
  local got
  got=$(query "$1")
  [[ "$got" == "$2" ]] || fail "$1 is '$got', expected $2"
}
scope='scope="PaymentController.create"'
expect "idem_calls_total{$scope,outcome=\"executed\"}" 4
expect "idem_calls_total{$scope,outcome=\"replayed\"}" 2
expect "idem_calls_total{$scope,outcome=\"in_flight\"}" 1
expect "idem_calls_total{$scope,outcome=\"failed\"}" 0
expect "idem_calls_in_progress{$scope}" 0
expect "idem_wait_seconds_count{$scope}" 4
expect "idem_fingerprint_mismatches_total{$scope}" 1
expect "idem_lease_steals_total{$scope}" 0
expect 'idem_store_operation_seconds_count{store="sqlite_store",operation="acquire"}' 8
expect 'idem_cache_hits_total{store="sqlite_store"}' 0
expect 'idem_store_operation_seconds_count{store="sqlite_store",operation="complete"}' 4
expect 'sum(idem_store_errors_total)' 0
expect 'count(idem_calls_total)' 4
echo "prometheus_scrape.sh: Prometheus read every expected value"
