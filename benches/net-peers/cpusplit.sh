#!/usr/bin/env bash
# The echo servers' CPU per request split into user and system time, from
# interleaved rounds: each round runs every server once per cell (the
# server pinned to CPU 0, the hub's echo_client on CPU 1, DURATION
# seconds), and the table gives each server's median over ROUNDS rounds.
# User and system time are the server process's utime and stime
# (/proc/PID/stat, the counters getrusage reports) over the requests the
# client counted. Loopback only, bounded.
#
#   bash benches/net-peers/cpusplit.sh          # ROUNDS=3 DURATION=3
#   CELLS="50:64 500:4096" bash benches/net-peers/cpusplit.sh
#   SERVERS="hub_uring other=DIR/echo_server:io_uring" bash benches/net-peers/cpusplit.sh
#       # NAME=PATH[:DRIVER] runs another build beside the named servers
#       # (hub, hub_uring, tokio, may, monoio); DRIVER is GREENLET_IO_DRIVER
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
. "$ROOT/benches/net-peers/echo_servers.sh"
ROUNDS="${ROUNDS:-3}"
DURATION="${DURATION:-3}"
CELLS="${CELLS:-50:64 50:4096 500:64 500:4096}"
SERVERS="${SERVERS:-hub hub_uring tokio monoio}"
PORT="${PORT:-7600}"
TICK=$(getconf CLK_TCK)
OUT="$(mktemp)"

for round in $(seq 1 "$ROUNDS"); do
    for cell in $CELLS; do
        conns=${cell%%:*}
        size=${cell#*:}
        for s in $SERVERS; do
            spec=$(echo_server_of "$s")
            read -r bin driver <<<"$spec"
            name=${s%%=*}
            PORT=$((PORT + 1))
            GREENLET_IO_DRIVER=$driver taskset -c 0 "$bin" --addr "127.0.0.1:$PORT" --workers 1 >/dev/null 2>&1 &
            pid=$!
            wait_for_port "$PORT"
            read -r u0 s0 < <(awk '{print $14, $15}' "/proc/$pid/stat")
            line=$(taskset -c 1 "$EX/echo_client" --addr "127.0.0.1:$PORT" --connections "$conns" \
                --size "$size" --duration "$DURATION" --workers 1 | grep '^RESULT' || true)
            read -r u1 s1 < <(awk '{print $14, $15}' "/proc/$pid/stat")
            kill "$pid" 2>/dev/null || true
            wait "$pid" 2>/dev/null || true
            n=$(sed -n 's/.*requests=\([0-9]*\).*/\1/p' <<<"$line")
            [ "${n:-0}" -gt 0 ] || { echo "$name c$conns ${size}B: no requests" >&2; continue; }
            awk -v c="c$conns-${size}B" -v nm="$name" -v n="$n" -v hz="$TICK" -v u="$((u1 - u0))" -v s="$((s1 - s0))" \
                'BEGIN { printf "%s %s %.3f %.3f %d\n", c, nm, u / hz * 1e6 / n, s / hz * 1e6 / n, n }' >>"$OUT"
        done
    done
done

echo "load: $(cut -d" " -f1-3 /proc/loadavg); median of $ROUNDS rounds: server CPU in us per request (user + system = total), requests/s"
sort -k1,1 -k2,2 -k5,5n "$OUT" | awk -v d="$DURATION" '
{ k = $1 " " $2; nk[k]++; u[k, nk[k]] = $3; s[k, nk[k]] = $4; t[k, nk[k]] = $3 + $4; r[k, nk[k]] = $5 / d; if (!(k in seen)) { seen[k] = 1; keys[++m] = k } }
function med(arr, k, n,   i, j, v, tmp) { for (i = 1; i <= n; i++) v[i] = arr[k, i]; for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (v[j] < v[i]) { tmp = v[i]; v[i] = v[j]; v[j] = tmp }; return v[int((n + 1) / 2)] }
END { for (i = 1; i <= m; i++) { k = keys[i]; printf "%-16s %-12s user %6.2f  sys %6.2f  total %6.2f  req/s %7d\n", substr(k, 1, index(k, " ") - 1), substr(k, index(k, " ") + 1), med(u, k, nk[k]), med(s, k, nk[k]), med(t, k, nk[k]), med(r, k, nk[k]) } }'
rm -f "$OUT"
