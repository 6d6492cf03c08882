#!/usr/bin/env bash
# Where an echo server's CPU goes, from `perf record -e cpu-clock -g` of
# the server process (sampled, so kernel time shows as well as user
# time): the share under the kernel's TCP send path (`tcp_sendmsg`,
# which on loopback also runs the peer's receive in softirq), under its
# TCP receive path (`tcp_recvmsg`), in user space, and the rest of the
# kernel (system call entry, epoll or io_uring, scheduling). The server
# is pinned to CPU 0, the hub's echo_client on CPU 1; the profile covers
# SECONDS of the client's run. Loopback only, bounded. Needs perf.
#
#   bash benches/net-peers/perfsplit.sh               # 4 servers x 4 cells
#   CELLS="50:64" SERVERS="hub tokio" bash benches/net-peers/perfsplit.sh
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
. "$ROOT/benches/net-peers/echo_servers.sh"
CELLS="${CELLS:-50:64 50:4096 500:64 500:4096}"
SERVERS="${SERVERS:-hub hub_uring tokio monoio}"
SECONDS_PROFILED="${SECONDS_PROFILED:-2}"
PORT="${PORT:-7700}"
command -v perf >/dev/null || { echo "perfsplit.sh needs perf" >&2; exit 2; }
DATA="$(mktemp)"
REPORT="$(mktemp)"
for cell in $CELLS; do
    conns=${cell%%:*}
    size=${cell#*:}
    for s in $SERVERS; do
        spec=$(echo_server_of "$s")
        read -r bin driver <<<"$spec"
        PORT=$((PORT + 1))
        GREENLET_IO_DRIVER=$driver taskset -c 0 "$bin" --addr "127.0.0.1:$PORT" --workers 1 >/dev/null 2>&1 &
        pid=$!
        wait_for_port "$PORT"
        taskset -c 1 "$EX/echo_client" --addr "127.0.0.1:$PORT" --connections "$conns" \
            --size "$size" --duration $((SECONDS_PROFILED + 2)) --workers 1 >/dev/null &
        cpid=$!
        sleep 1
        timeout "$SECONDS_PROFILED" perf record -e cpu-clock -F 4000 -g -p "$pid" -o "$DATA" >/dev/null 2>&1 || true
        wait "$cpid" || true
        kill "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
        perf report -i "$DATA" --children --sort sym --stdio -g none 2>/dev/null >"$REPORT"
        awk -v n="${s%%=*}" -v c="c$conns-${size}B" '
            $3 == "[k]" && $4 == "tcp_sendmsg" { sub("%", "", $1); snd = $1 }
            $3 == "[k]" && $4 == "tcp_recvmsg" { sub("%", "", $1); rcv = $1 }
            $3 == "[.]" { sub("%", "", $2); usr += $2 }
            END { printf "%-12s %-12s TCP send %5.1f%%  TCP receive %5.1f%%  TCP %5.1f%%  user %5.1f%%  rest of kernel %5.1f%%\n",
                  c, n, snd, rcv, snd + rcv, usr, 100 - snd - rcv - usr }' "$REPORT"
    done
done
rm -f "$DATA" "$REPORT"
