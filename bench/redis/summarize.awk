# bench/redis/summarize.awk — the table of bench/redis/run.sh from its RESULT lines:
#   awk -v threads=8 -f bench/redis/summarize.awk <output of run.sh or idem_bench_redis>
# Every cell is the median over the rounds.

$1 == "SERVER" { server[$2] = $3; server_order[++servers] = $2 }
$1 == "RESULT" {
  k = $2 "|" $3 "|" $4
  n[k]++; ops[k, n[k]] = $5; p50[k, n[k]] = $6; p99[k, n[k]] = $7
}
function median(arr, k,   i, j, v, tmp, m) {
  m = n[k]
  for (i = 1; i <= m; i++) v[i] = arr[k, i] + 0
  for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++) if (v[j] < v[i]) { tmp = v[i]; v[i] = v[j]; v[j] = tmp }
  return m % 2 ? v[(m + 1) / 2] : (v[m / 2] + v[m / 2 + 1]) / 2
}
function mops(row, t, phase,   k) { k = row "|" t "|" phase; return (k in n) ? median(ops, k) : 0 }
function cell(row, t, phase,   k) {
  k = row "|" t "|" phase
  if (!(k in n)) return sprintf("%-24s", "-")
  return sprintf("%-24s", sprintf("%d (%.0f/%.0f)", median(ops, k), median(p50, k), median(p99, k)))
}
function ratio(a, b) { return (b > 0 && a > 0) ? sprintf("%.2fx", a / b) : "-" }
function best_peer(t, phase,   best, v) {
  best = mops("powertools", t, phase)
  v = mops("node-idempotency", t, phase); if (v > best) best = v
  if (phase == "first") { v = mops("powertools+cache", t, phase); if (v > best) best = v }
  return best
}
END {
  rows_n = split("raw raw-lua raw-idem store store-1conn engine engine+cache powertools powertools+cache node-idempotency", rows, " ")
  for (pass = 1; pass <= 2; pass++) {
    t = pass == 1 ? 1 : threads
    printf "\n## %s: calls/s (p50/p99 us), medians over the rounds\n", pass == 1 ? "one call at a time" : threads " C++ threads / " threads " Node calls in flight"
    printf "%-17s %-24s %-24s %-24s\n", "", "first call", "replay", "hot (one key)"
    for (i = 1; i <= rows_n; i++) printf "%-17s %s %s %s\n", rows[i], cell(rows[i], t, "first"), cell(rows[i], t, "replay"), cell(rows[i], t, "hot")
    printf "store  / raw:        first %s  replay %s\n", ratio(mops("store", t, "first"), mops("raw", t, "first")), ratio(mops("store", t, "replay"), mops("raw", t, "replay"))
    printf "store  / raw-lua:    first %s  replay %s\n", ratio(mops("store", t, "first"), mops("raw-lua", t, "first")), ratio(mops("store", t, "replay"), mops("raw-lua", t, "replay"))
    printf "store  / raw-idem:   first %s  replay %s  (the cost of the library over its own scripts)\n", ratio(mops("store", t, "first"), mops("raw-idem", t, "first")), ratio(mops("store", t, "replay"), mops("raw-idem", t, "replay"))
    printf "engine / store:      first %s  replay %s  (what the engine adds over its store)\n", ratio(mops("engine", t, "first"), mops("store", t, "first")), ratio(mops("engine", t, "replay"), mops("store", t, "replay"))
    printf "store-1conn / raw:   first %s  replay %s\n", ratio(mops("store-1conn", t, "first"), mops("raw", t, "first")), ratio(mops("store-1conn", t, "replay"), mops("raw", t, "replay"))
    printf "engine / best peer:  first %s  replay %s  (peers without their local cache)\n", ratio(mops("engine", t, "first"), best_peer(t, "first")), ratio(mops("engine", t, "replay"), best_peer(t, "replay"))
    printf "engine+cache replay / best peer replay: %s; / powertools+cache replay: %s\n", ratio(mops("engine+cache", t, "replay"), best_peer(t, "replay")), ratio(mops("engine+cache", t, "replay"), mops("powertools+cache", t, "replay"))
  }
  printf "\n## wake-up of a waiting duplicate (holder calls complete() -> the waiter returns)\n"
  printf "p50 %.0f us, p99 %.0f us, max %.0f us\n", median(p50, "wake|1|wake"), median(p99, "wake|1|wake"), median(p50, "wake-max|1|wake")
  if (servers > 0) {
    printf "\n## Redis server time per call, from INFO commandstats (us): idem's script paths and plain commands\n"
    for (i = 1; i <= servers; i++) printf "%-14s %s\n", server_order[i], server[server_order[i]]
  }
}
