#!/usr/bin/env bash
# The hub's echo, HTTP and RESP servers side by side with the same servers
# on tokio, may and monoio (io_uring, thread per core), in one run: the
# network table, four systems by three protocols. Loopback only; every run
# bounded in time (echo, HTTP) or in requests (RESP).
#
#   bash benches/net-peers/run.sh            # DURATION=3 seconds per timed run
#   DURATION=5 bash benches/net-peers/run.sh
#   PARTS=1 bash benches/net-peers/run.sh    # part 1 only (1 worker)
#   PROTOCOLS="resp" bash benches/net-peers/run.sh   # some of: echo http resp
#   ECHO_CONNS="1 50 500" RESP_N=100000 RESP_N_PIPELINED=500000 ...
#       # echo's connection counts (default 50 500), redis-benchmark's -n
#       # per command unpipelined and with -P 16
#   CPUS_2W="0,1:1" bash benches/net-peers/run.sh
#       # part 2's server CPUs and client CPUs (taskset lists, default
#       # 0,1:0,1): "0,1:1" keeps the client on CPU 1, so the worker that
#       # runs there shares it; "0:1" gives both workers one CPU
#   HUB_VARIANTS="base=DIR other=DIR2" bash benches/net-peers/run.sh
#       # also other builds' echo_server and http_hello (from DIR, DIR2:
#       # servers "base", "other"), run beside the others in every echo
#       # and HTTP cell
#
# The hub runs twice, once per I/O driver (GREENLET_IO_DRIVER, see
# docs/io.md): "hub" under epoll, "hub_uring" under io_uring (HUB_URING=0
# leaves that column out, as on a kernel without io_uring); the ratios are the epoll
# hub's to each other column, hub_uring's included.
#
# Part 1, 1 worker: the server is pinned to CPU 0, the client to CPU 1
# (taskset). Part 2, 2 workers: the server may use both CPUs, so the client
# competes with it for cores. Echo: 50 and 500 connections x 64 B and
# 4 KiB messages, driven by the hub's echo_client (the same client for
# every server). HTTP: wrk at 50 and 500 connections. RESP:
# redis-benchmark -c 50 -t ping,set,get,incr (PING_INLINE, PING_MBULK, SET,
# GET, INCR, RESP_N requests each), unpipelined and with -P 16; its
# requests/s is the five commands' requests over their summed time, its
# p99 the highest of the five.
#
# The server's CPU time per request is utime+stime of the server process
# (the counters getrusage reports, read from /proc/PID/stat) over the run,
# divided by the requests served: on two cores a load test is often
# client-bound, and this is the server's own cost. "top thread" is the
# share of that CPU time spent by the server's busiest thread
# (/proc/PID/task/*/stat): with 2 workers, near 100% means one worker
# served nearly everything, near 50% that the load was spread. "busy" is
# the server's and the client's CPU time over the wall time of the run
# (% of one CPU): a server well below 100% while the client is at 100%
# (part 1) was not the bottleneck, and its requests/s are the client's.
# "slow/mean" (echo only) is the echo client's count of echoes served to
# its slowest connection over the mean per connection: 1.00 when every
# connection was served alike.
#
# Prints one table (requests/s, the hub's ratio to each system, p99 and
# CPU per request of each) and writes target/net-peers/results.csv and
# target/net-peers/plot.svg.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
PEERS="$ROOT/benches/net-peers"
OUT="$ROOT/target/net-peers"
DURATION="${DURATION:-3}"
PARTS="${PARTS:-1 2}"
PROTOCOLS="${PROTOCOLS:-echo http resp}"
ECHO_CONNS="${ECHO_CONNS:-50 500}"
CPUS_2W="${CPUS_2W:-0,1:0,1}"
case $CPUS_2W in
*:*) ;;
*) echo "CPUS_2W: want SERVER_CPUS:CLIENT_CPUS (taskset lists), not $CPUS_2W" >&2; exit 2 ;;
esac
RESP_N="${RESP_N:-100000}"
RESP_N_PIPELINED="${RESP_N_PIPELINED:-500000}"
mkdir -p "$OUT"
LOAD_BEFORE="$(cut -d" " -f1-3 /proc/loadavg)"

if ! command -v wrk >/dev/null || ! command -v redis-benchmark >/dev/null; then
    apt-get update >/dev/null && apt-get install -y wrk redis-tools >/dev/null
fi
(cd "$ROOT" && cargo build --release --example echo_server --example echo_client --example http_hello)
(cd "$PEERS" && cargo build --release --bins)
EX="$ROOT/target/release/examples"
PB="$PEERS/target/release"
TICK=$(getconf CLK_TCK)

declare -A SERVER=(
    [hub_echo]="$EX/echo_server" [tokio_echo]="$PB/tokio_echo" [may_echo]="$PB/may_echo"
    [monoio_echo]="$PB/monoio_echo"
    [hub_http]="$EX/http_hello" [tokio_http]="$PB/tokio_http" [may_http]="$PB/may_http"
    [monoio_http]="$PB/monoio_http"
    [hub_resp]="$PB/hub_resp" [tokio_resp]="$PB/tokio_resp" [may_resp]="$PB/may_resp"
    [monoio_resp]="$PB/monoio_resp"
)
declare -A DRIVER=([hub]=epoll [hub_uring]=io_uring)
for k in echo http resp; do SERVER[hub_uring_$k]=${SERVER[hub_$k]}; done
IMPLS="hub"
[ "${HUB_URING:-1}" = 0 ] || IMPLS="hub hub_uring"
for v in ${HUB_VARIANTS:-}; do
    name=${v%%=*}
    dir=${v#*=}
    if [ "$name" = "$v" ] || [ ! -x "$dir/echo_server" ] || [ ! -x "$dir/http_hello" ]; then
        echo "HUB_VARIANTS: want NAME=DIR with DIR/echo_server and DIR/http_hello, not $v" >&2
        exit 2
    fi
    SERVER[${name}_echo]="$dir/echo_server"
    SERVER[${name}_http]="$dir/http_hello"
    IMPLS="$IMPLS $name"
done
IMPLS="$IMPLS tokio may monoio"

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
# "TID TICKS" for each thread of process $1.
thread_ticks() { for f in /proc/"$1"/task/*/stat; do awk '{print $1, $14 + $15}' "$f" 2>/dev/null || true; done; }

wait_port() {
    for _ in $(seq 1 100); do
        if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then return 0; fi
        sleep 0.05
    done
    echo "server on port $1 did not come up" >&2
    return 1
}

PORT=7400
CSV="$OUT/results.csv"
echo "scenario,server,rps,p99_us,cpu_us_per_req,top_thread_pct,server_busy_pct,client_busy_pct,slowest_over_mean" >"$CSV"

# run KIND(echo|http|resp) IMPL WORKERS SERVER_CPUS CLIENT_CPUS CONNS SIZE LABEL
# (for resp, SIZE is redis-benchmark's -P)
run() {
    local kind=$1 impl=$2 workers=$3 scpus=$4 ccpus=$5 conns=$6 size=$7 label=$8
    [ -n "${SERVER[${impl}_${kind}]:-}" ] || return 0
    PORT=$((PORT + 1))
    GREENLET_IO_DRIVER="${DRIVER[$impl]:-auto}" taskset -c "$scpus" "${SERVER[${impl}_${kind}]}" --addr "127.0.0.1:$PORT" --workers "$workers" >/dev/null 2>&1 &
    local pid=$!
    wait_port "$PORT"
    local t0 t1 rps p99 n th0 th1 w0 w1 ctimes slow=n/a
    t0=$(cpu_ticks "$pid")
    th0=$(thread_ticks "$pid")
    w0=$(date +%s.%N)
    if [ "$kind" = echo ]; then
        local line
        line=$(taskset -c "$ccpus" "$EX/echo_client" --addr "127.0.0.1:$PORT" --connections "$conns" \
            --size "$size" --duration "$DURATION" --workers 1 | grep '^RESULT' || true
            times)
        ctimes=$(tail -1 <<<"$line")
        n=$(sed -n 's/.*requests=\([0-9]*\).*/\1/p' <<<"$line")
        rps=$(sed -n 's/.* rps=\([0-9]*\).*/\1/p' <<<"$line")
        p99=$(sed -n 's/.*p99_us=\([0-9]*\).*/\1/p' <<<"$line")
        slow=$(sed -n 's/.*slowest_over_mean=\([0-9.]*\).*/\1/p' <<<"$line")
    elif [ "$kind" = http ]; then
        local w
        w=$(taskset -c "$ccpus" wrk -t1 -c"$conns" -d"${DURATION}s" --latency "http://127.0.0.1:$PORT/"
            times)
        ctimes=$(tail -1 <<<"$w")
        n=$(awk '/requests in/ {print $1}' <<<"$w")
        rps=$(awk '/Requests\/sec/ {printf "%d", $2}' <<<"$w")
        p99=$(awk '$1 == "99%" {v=$2; if (v ~ /us$/) {sub(/us/,"",v); print int(v)} else if (v ~ /ms$/) {sub(/ms/,"",v); print int(v*1000)} else {sub(/s/,"",v); print int(v*1000000)}}' <<<"$w")
    else
        # redis-benchmark --csv: "test","rps","avg_latency_ms","min_latency_ms",
        # "p50_latency_ms","p95_latency_ms","p99_latency_ms","max_latency_ms".
        local r per
        per=$RESP_N
        [ "$size" -gt 1 ] && per=$RESP_N_PIPELINED
        r=$(timeout 300 taskset -c "$ccpus" redis-benchmark -h 127.0.0.1 -p "$PORT" -c "$conns" -n "$per" \
            -P "$size" -t ping,set,get,incr --csv 2>/dev/null || true
            times)
        ctimes=$(tail -1 <<<"$r")
        read -r n rps p99 < <(awk -F'","' -v per="$per" 'NR > 1 && NF >= 7 {
                gsub(/"/, "", $2); gsub(/"/, "", $7)
                if ($2 > 0) { t += per / $2; k++ }
                if ($7 + 0 > p) p = $7 + 0
            }
            END { if (k > 0) printf "%d %d %d\n", k * per, k * per / t, p * 1000; else print "0 0 0" }' <<<"$r")
    fi
    t1=$(cpu_ticks "$pid")
    th1=$(thread_ticks "$pid")
    w1=$(date +%s.%N)
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    local cpu="n/a"
    if [ -n "${n:-}" ] && [ "${n:-0}" -gt 0 ]; then
        cpu=$(awk -v a="$t0" -v b="$t1" -v hz="$TICK" -v n="$n" 'BEGIN {printf "%.2f", (b - a) / hz * 1e6 / n}')
    fi
    local top
    top=$(awk 'FNR == NR { a[$1] = $2; next } { d = $2 - a[$1]; s += d; if (d > m) m = d }
        END { if (s > 0) printf "%.0f", 100 * m / s; else print "n/a" }' <(echo "$th0") <(echo "$th1"))
    # Busy: CPU time over the wall time of the client's run, in % of one
    # CPU, for the server (from its ticks) and the client (bash's `times`
    # of the subshell that ran it: "0m1.234s 0m0.567s", user and system).
    local sbusy cbusy
    sbusy=$(awk -v a="$t0" -v b="$t1" -v hz="$TICK" -v w0="$w0" -v w1="$w1" 'BEGIN {printf "%.0f", 100 * (b - a) / hz / (w1 - w0)}')
    cbusy=$(awk -v w0="$w0" -v w1="$w1" '{ t = 0; for (i = 1; i <= 2; i++) { split($i, p, "m"); sub(/s$/, "", p[2]); t += p[1] * 60 + p[2] } }
        END {printf "%.0f", 100 * t / (w1 - w0)}' <<<"$ctimes")
    echo "$label,$impl,${rps:-0},${p99:-0},$cpu,$top,$sbusy,$cbusy,${slow:-n/a}" >>"$CSV"
}

for part in $PARTS; do
    if [ $part = 1 ]; then W=1; S=0; C=1; TAG="1w"; else W=2; S=${CPUS_2W%%:*}; C=${CPUS_2W#*:}; TAG="2w"; fi
    for proto in $PROTOCOLS; do
        case $proto in
        echo)
            for conns in $ECHO_CONNS; do
                for size in 64 4096; do
                    for impl in $IMPLS; do
                        run echo $impl $W $S $C $conns $size "echo-$TAG-c$conns-${size}B"
                    done
                done
            done ;;
        http)
            for conns in 50 500; do
                for impl in $IMPLS; do
                    run http $impl $W $S $C $conns 0 "http-$TAG-c$conns"
                done
            done ;;
        resp)
            for pipe in 1 16; do
                for impl in $IMPLS; do
                    run resp $impl $W $S $C 50 $pipe "resp-$TAG-c50-P$pipe"
                done
            done ;;
        *) echo "PROTOCOLS: echo, http or resp, not $proto" >&2; exit 2 ;;
        esac
    done
done

echo
echo "machine: $(nproc) CPUs, $(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1); load before: $LOAD_BEFORE, after: $(cut -d" " -f1-3 /proc/loadavg)" 2>/dev/null || true
awk -F, -v impls="$IMPLS" '
NR > 1 { k = $1; if (!(k in seen)) { seen[k] = 1; names[++n] = k }; rps[k, $2] = $3; p99[k, $2] = $4; cpu[k, $2] = $5; top[k, $2] = $6; sb[k, $2] = $7; cb[k, $2] = $8; sl[k, $2] = $9 }
function ratio(k, s) { return rps[k, s] > 0 && rps[k, "hub"] > 0 ? sprintf("%.2f", rps[k, "hub"] / rps[k, s]) : "-" }
function or_dash(v) { return v == "" ? "-" : v }
END {
    ns = split(impls, all, " ")
    h1 = sprintf("%-20s", "scenario"); h2 = sprintf("%-20s", "")
    for (j = 1; j <= ns; j++) { h1 = h1 sprintf(" %8s", substr(all[j], 1, 8)); h2 = h2 sprintf(" %8s", "req/s") }
    h1 = h1 " |"; h2 = h2 " |"
    for (j = 2; j <= ns; j++) { h1 = h1 sprintf(" %6s", "h/" substr(all[j], 1, 4)); h2 = h2 sprintf(" %6s", "") }
    h1 = h1 " |"; h2 = h2 " |"
    for (j = 1; j <= ns; j++) { h1 = h1 sprintf(" %7s", substr(all[j], 1, 7)); h2 = h2 sprintf(" %7s", "p99 us") }
    h1 = h1 " |"; h2 = h2 " |"
    for (j = 1; j <= ns; j++) { h1 = h1 sprintf(" %7s", substr(all[j], 1, 7)); h2 = h2 sprintf(" %7s", "us/req") }
    print h1 " | top thread (%)   | busy server/client (%) | slow/mean"
    print h2 " | " impls " | " impls
    for (i = 1; i <= n; i++) {
        k = names[i]; line = sprintf("%-20s", k); t = ""; b = ""
        for (j = 1; j <= ns; j++) line = line sprintf(" %8s", or_dash(rps[k, all[j]]))
        line = line " |"
        for (j = 2; j <= ns; j++) line = line sprintf(" %6s", ratio(k, all[j]))
        line = line " |"
        for (j = 1; j <= ns; j++) line = line sprintf(" %7s", or_dash(p99[k, all[j]]))
        line = line " |"
        for (j = 1; j <= ns; j++) line = line sprintf(" %7s", or_dash(cpu[k, all[j]]))
        sm = ""
        for (j = 1; j <= ns; j++) { t = t (j > 1 ? "/" : "") or_dash(top[k, all[j]]); b = b (j > 1 ? " " : "") or_dash(sb[k, all[j]]) "/" or_dash(cb[k, all[j]]); sm = sm (j > 1 ? " " : "") or_dash(sl[k, all[j]]) }
        print line " | " sprintf("%-16s", t) " | " b " | " sm
    }
}' "$CSV"
"$PB/plot" "$CSV" "$OUT/plot.svg"
