# bench/redis/async_summarize.awk — the table of bench/redis/async_run.sh from its RESULT lines:
#   awk -v in_flight=1,8,64,256 -f bench/redis/async_summarize.awk <output>
# Every cell is the median over the rounds (calls/s); allocations per call (idem's rows and the floor
# print them as an eighth field) are those of the last round.
$1 == "RESULT" { k = $2 "|" $3 "|" $4; n[k]++; ops[k, n[k]] = $5; if (NF >= 8) allocations[k] = $8 }
function median(k,   i, j, v, tmp, m) {
  m = n[k]
  for (i = 1; i <= m; i++) v[i] = ops[k, i] + 0
  for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++) if (v[j] < v[i]) { tmp = v[i]; v[i] = v[j]; v[j] = tmp }
  return m % 2 ? v[(m + 1) / 2] : (v[m / 2] + v[m / 2 + 1]) / 2
}
function mops(row, c, phase,   k) { k = row "|" c "|" phase; return (k in n) ? median(k) : 0 }
function allocs(row, c, phase,   k) { k = row "|" c "|" phase; return (k in allocations) ? allocations[k] : "-" }
function ratio(a, b) { return (b > 0 && a > 0) ? sprintf("%.2fx", a / b) : "-" }
function best_peer(c, phase,   a, b) { a = mops("powertools", c, phase); b = mops("node-idempotency", c, phase); return a > b ? a : b }
END {
  levels = split(in_flight, level, ",")
  for (p = 1; p <= 2; p++) {
    phase = p == 1 ? "first" : "replay"
    printf "\n## %s calls: calls/s, medians over the rounds\n", phase
    printf "| in flight | idem async | idem async+loop | hiredis pipelined | powertools | node-idempotency | async / best peer | async+loop / best peer | best idem / floor |\n"
    printf "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n"
    for (i = 1; i <= levels; i++) {
      c = level[i]
      a = mops("idem-async", c, phase); l = mops("idem-async+loop", c, phase); best = a > l ? a : l
      printf "| %s | %d | %d | %d | %d | %d | %s | %s | %s |\n", c, a, l, mops("hiredis-pipelined", c, phase),
        mops("powertools", c, phase), mops("node-idempotency", c, phase), ratio(a, best_peer(c, phase)),
        ratio(l, best_peer(c, phase)), ratio(best, mops("hiredis-pipelined", c, phase))
    }
    printf "allocations per call (every thread's), in flight: idem async / idem async+loop / hiredis pipelined:"
    for (i = 1; i <= levels; i++) {
      c = level[i]
      printf " %s: %s / %s / %s;", c, allocs("idem-async", c, phase), allocs("idem-async+loop", c, phase),
        allocs("hiredis-pipelined", c, phase)
    }
    printf " idem sync at 1: %s\n", allocs("idem-sync", 1, phase)
    printf "async / sync at 1 in flight: %s (async+loop: %s)\n", ratio(mops("idem-async", 1, phase), mops("idem-sync", 1, phase)),
      ratio(mops("idem-async+loop", 1, phase), mops("idem-sync", 1, phase))
  }
}
