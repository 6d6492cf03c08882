#!/usr/bin/env bash
# Summarise several runs of run.sh (their results.csv copies): per
# scenario the median and range of the per-run ratios of the hub's
# requests/s to each other server's (tokio, may, monoio and run.sh's
# HUB_VARIANTS), and each server's median p99, median server CPU per
# request and median share of its CPU spent by its busiest thread (runs
# that recorded it: with 2 workers ~100% is one worker doing everything)
# and, for echo, the median of the slowest connection's echoes over the
# mean (runs that recorded it). Also writes MEDIANS,
# a CSV of run.sh's shape with each cell's median over the runs (for the
# plot binary).
#
#   bash benches/net-peers/summary.sh MEDIANS.csv run1.csv run2.csv ...
set -euo pipefail
OUT=${1:?give MEDIANS.csv, then the CSVs of the runs}
shift
[ $# -ge 1 ] || { echo "give the CSV of at least one run" >&2; exit 2; }
awk -F, -v out="$OUT" '
function median(list,    a, n, i, j, t) {
    n = split(list, a, " ")
    for (i = 2; i <= n; i++) { t = a[i] + 0; for (j = i - 1; j >= 1 && a[j] + 0 > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
    lo = a[1]; hi = a[n]
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
function ratios(k, other,    r, i) {
    r = ""
    for (i = 1; i <= runs; i++) if (((k, "hub", i) in rps) && ((k, other, i) in rps) && rps[k, other, i] > 0) r = r " " rps[k, "hub", i] / rps[k, other, i]
    if (r == "") return "-"
    m = median(r)
    return sprintf("%.2f (%.2f-%.2f)", m, lo, hi)
}
function cell(k, s, what,    l, i) {
    l = ""
    for (i = 1; i <= runs; i++) if ((k, s, i) in rps && (what != "top" || top[k, s, i] ~ /^[0-9]/) && (what != "slow" || slow[k, s, i] ~ /^[0-9]/)) l = l " " (what == "rps" ? rps[k, s, i] : what == "p99" ? p99[k, s, i] : what == "top" ? top[k, s, i] : what == "slow" ? slow[k, s, i] : cpu[k, s, i])
    return l == "" ? "" : median(l)
}
function or_dash(v) { return v == "" ? "-" : v }
FNR == 1 { runs++; next }
{
    if (!($1 in seen)) { seen[$1] = 1; order[++n] = $1 }
    if (!($2 in have)) { have[$2] = 1; servers[++ns] = $2 }
    rps[$1, $2, runs] = $3; p99[$1, $2, runs] = $4; cpu[$1, $2, runs] = $5; top[$1, $2, runs] = $6; slow[$1, $2, runs] = $9
}
END {
    # Columns in the order the servers first appear (run.sh: hub, variants, tokio, may, monoio).
    printf "%d runs\n", runs
    h = sprintf("%-20s", "scenario")
    for (j = 1; j <= ns; j++) if (servers[j] != "hub") h = h sprintf(" %-18s", "hub/" servers[j])
    names = ""
    for (j = 1; j <= ns; j++) names = names (j > 1 ? "/" : "") servers[j]
    printf "%s   p99 %s (ms)   cpu %s (us/req)   top thread %s (%%)   slow/mean %s\n", h, names, names, names, names
    print "scenario,server,rps,p99_us,cpu_us_per_req,top_thread_pct" > out
    for (i = 1; i <= n; i++) {
        k = order[i]
        line = sprintf("%-20s", k)
        for (j = 1; j <= ns; j++) if (servers[j] != "hub") line = line sprintf(" %-18s", ratios(k, servers[j]))
        p = ""; c = ""; t = ""; sm = ""
        for (j = 1; j <= ns; j++) {
            s = servers[j]
            v = cell(k, s, "p99"); p = p (j > 1 ? " / " : "") (v == "" ? "-" : sprintf("%.1f", v / 1000))
            v = cell(k, s, "cpu"); c = c (j > 1 ? " / " : "") (v == "" ? "-" : sprintf(v < 1 ? "%.2f" : "%.1f", v))
            t = t (j > 1 ? "/" : "") or_dash(cell(k, s, "top"))
            v = cell(k, s, "slow"); sm = sm (j > 1 ? " / " : "") (v == "" ? "-" : sprintf("%.2f", v))
        }
        printf "%s   %s   %s   %s   %s\n", line, p, c, t, sm
        for (j = 1; j <= ns; j++) {
            s = servers[j]
            tp = cell(k, s, "top")
            if (cell(k, s, "rps") != "") printf "%s,%s,%d,%d,%.2f,%s\n", k, s, cell(k, s, "rps"), cell(k, s, "p99"), cell(k, s, "cpu"), tp == "" ? "n/a" : tp > out
        }
    }
}' "$@"
