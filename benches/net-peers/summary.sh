#!/usr/bin/env bash
# Summarise several runs of run.sh (their results.csv copies): per
# scenario the median and range of the per-run ratios hub / tokio and
# hub / may (and hub / V for each of run.sh's HUB_VARIANTS), the median
# p99 of the hub, tokio and may, the median server CPU per request of
# each server, and the median share of the hub's, tokio's and may's
# server CPU spent by its busiest thread (runs that recorded it: with 2
# workers ~100% is one worker doing everything). Also writes MEDIANS,
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
    for (i = 1; i <= runs; i++) if ((k, s, i) in rps && (what != "top" || top[k, s, i] ~ /^[0-9]/)) l = l " " (what == "rps" ? rps[k, s, i] : what == "p99" ? p99[k, s, i] : what == "top" ? top[k, s, i] : cpu[k, s, i])
    return l == "" ? "" : median(l)
}
function or_dash(v) { return v == "" ? "-" : v }
FNR == 1 { runs++; next }
{
    if (!($1 in seen)) { seen[$1] = 1; order[++n] = $1 }
    if (!($2 in have)) { have[$2] = 1; servers[++ns] = $2 }
    rps[$1, $2, runs] = $3; p99[$1, $2, runs] = $4; cpu[$1, $2, runs] = $5; top[$1, $2, runs] = $6
}
END {
    nv = 0
    for (j = 1; j <= ns; j++) if (servers[j] != "hub" && servers[j] != "tokio" && servers[j] != "may") var[++nv] = servers[j]
    vh = ""; vc = ""
    for (j = 1; j <= nv; j++) { vh = vh sprintf(" %-18s", "hub/" var[j]); vc = vc "/" var[j] }
    printf "%d runs\n", runs
    printf "%-20s %-18s %-18s%s %-22s %-34s %s\n", "scenario", "hub/tokio", "hub/may", vh, "p99 hub/tok/may (ms)", "cpu hub/tok/may" vc " (us/req)", "top thread hub/tok/may (%)"
    print "scenario,server,rps,p99_us,cpu_us_per_req,top_thread_pct" > out
    for (i = 1; i <= n; i++) {
        k = order[i]
        p = sprintf("%.1f / %.1f / %.1f", cell(k, "hub", "p99") / 1000, cell(k, "tokio", "p99") / 1000, cell(k, "may", "p99") / 1000)
        c = sprintf("%.1f / %.1f / %.1f", cell(k, "hub", "cpu"), cell(k, "tokio", "cpu"), cell(k, "may", "cpu"))
        vr = ""
        for (j = 1; j <= nv; j++) { c = c sprintf(" / %.1f", cell(k, var[j], "cpu")); vr = vr sprintf(" %-18s", ratios(k, var[j])) }
        t = or_dash(cell(k, "hub", "top")) "/" or_dash(cell(k, "tokio", "top")) "/" or_dash(cell(k, "may", "top"))
        printf "%-20s %-18s %-18s%s %-22s %-34s %s\n", k, ratios(k, "tokio"), ratios(k, "may"), vr, p, c, t
        for (j = 1; j <= ns; j++) {
            s = servers[j]
            tp = cell(k, s, "top")
            if (cell(k, s, "rps") != "") printf "%s,%s,%d,%d,%.2f,%s\n", k, s, cell(k, s, "rps"), cell(k, s, "p99"), cell(k, s, "cpu"), tp == "" ? "n/a" : tp > out
        }
    }
}' "$@"
