# bench/redis/cluster_summarize.awk — the table of bench/redis/cluster_run.sh from its RESULT and
# STATS lines:   awk -v threads=8 -f bench/redis/cluster_summarize.awk <output of cluster_run.sh>
# A cell is the median over every sample of every round. A ratio is the median of the ratios of
# samples taken side by side (same round, same sample number: the rows ran back to back), so that
# the machine's drifting load cancels out; the ratio of the cells' medians follows in brackets.

$1 == "#" && $2 == "idem_bench_redis_cluster:" { round++ }
$1 == "RESULT" {
  k = $2 "|" $3 "|" $4
  n[k]++; ops[k, n[k]] = $5; p50[k, n[k]] = $6; p99[k, n[k]] = $7
  by_sample[k, round "|" $8] = $5
  samples[$3 "|" $4, round "|" $8] = 1
}
$1 == "STATS" {
  k = $2 "|" $3 "|" $4
  sn[k]++
  if (!(k in rt_min) || $5 < rt_min[k]) rt_min[k] = $5
  if (!(k in rt_max) || $5 > rt_max[k]) rt_max[k] = $5
  if (!(k in ev_min) || $11 < ev_min[k]) ev_min[k] = $11
  if (!(k in ev_max) || $11 > ev_max[k]) ev_max[k] = $11
  redir[k] += $6; retries[k] += $8; other[k] += $12
  if ($7 > refresh_max[k]) refresh_max[k] = $7
  if ($9 > reloads[k]) reloads[k] = $9
  if ($10 > conns[k]) conns[k] = $10
}
function sort_median(v, m,   i, j, tmp) {
  for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++) if (v[j] < v[i]) { tmp = v[i]; v[i] = v[j]; v[j] = tmp }
  return m % 2 ? v[(m + 1) / 2] : (v[m / 2] + v[m / 2 + 1]) / 2
}
function median(arr, k,   i, v) { for (i = 1; i <= n[k]; i++) v[i] = arr[k, i] + 0; return sort_median(v, n[k]) }
function mops(row, t, phase,   k) { k = row "|" t "|" phase; return (k in n) ? median(ops, k) : 0 }
function cell(row, t, phase,   k) {
  k = row "|" t "|" phase
  if (!(k in n)) return sprintf("%-21s", "-")
  return sprintf("%-21s", sprintf("%d (%.0f/%.0f)", median(ops, k), median(p50, k), median(p99, k)))
}
# Median over the side-by-side samples of a / b, then the ratio of the medians.
function ratio(a, b, t, phase,   ka, kb, key, parts, m, v, lo, hi, i) {
  ka = a "|" t "|" phase; kb = b "|" t "|" phase
  m = 0
  for (key in samples) {
    split(key, parts, SUBSEP)
    if (parts[1] != t "|" phase) continue
    if (((ka, parts[2]) in by_sample) && ((kb, parts[2]) in by_sample) && by_sample[kb, parts[2]] > 0) {
      v[++m] = by_sample[ka, parts[2]] / by_sample[kb, parts[2]]
    }
  }
  if (m == 0) return sprintf("%-21s", "-")
  return sprintf("%-21s", sprintf("%.2fx (%.2fx)", sort_median(v, m), mops(a, t, phase) / mops(b, t, phase)))
}
END {
  rows_n = split("cluster-raw cluster-store single-raw single-store", rows, " ")
  printf "\n## calls/s (p50/p99 us): medians over %d rounds x their samples\n", round
  printf "%-27s %-21s %-21s %-21s %-21s\n", "", "first, 1 thread", "replay, 1 thread", "first, " threads " threads", "replay, " threads " threads"
  for (i = 1; i <= rows_n; i++) {
    printf "%-27s %s %s %s %s\n", rows[i], cell(rows[i], 1, "first"), cell(rows[i], 1, "replay"), cell(rows[i], threads, "first"), cell(rows[i], threads, "replay")
  }
  printf "## ratios: median of side-by-side samples (ratio of the medians)\n"
  split("cluster-store/cluster-raw cluster-store/single-store single-store/single-raw cluster-raw/single-raw", pairs, " ")
  for (p = 1; p <= 4; p++) {
    split(pairs[p], ab, "/")
    printf "%-27s %s %s %s %s\n", pairs[p], ratio(ab[1], ab[2], 1, "first"), ratio(ab[1], ab[2], 1, "replay"), ratio(ab[1], ab[2], threads, "first"), ratio(ab[1], ab[2], threads, "replay")
  }
  printf "\n## the store's round trips per call in the measured phases (min-max over the samples), EVALSHA per\n"
  printf "## call and other commands sent to the servers (INFO commandstats), redirections and retries (all summed\n"
  printf "## over the measured phases); slot map refreshes, script reloads, connections: the store's totals\n"
  for (i = 2; i <= rows_n; i += 2) {
    for (tt = 1; tt <= 2; tt++) {
      t = tt == 1 ? 1 : threads
      for (ph = 1; ph <= 2; ph++) {
        phase = ph == 1 ? "first" : "replay"
        k = rows[i] "|" t "|" phase
        if (!(k in sn)) continue
        printf "%-13s %d thr %-6s round trips/call %.4f-%.4f  EVALSHA/call %.4f-%.4f  other commands %d  redirections %d  retries %d  refreshes %d  reloads %d  connections %d\n", rows[i], t, phase, rt_min[k], rt_max[k], ev_min[k], ev_max[k], other[k], redir[k], retries[k], refresh_max[k], reloads[k], conns[k]
      }
    }
  }
}
