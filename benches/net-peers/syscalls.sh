#!/usr/bin/env bash
# System calls per request of one echo server under `strace -c -f`: the
# server pinned to CPU 0, the hub's echo_client on CPU 1 for DURATION
# seconds. Loopback only, bounded.
#
#   bash benches/net-peers/syscalls.sh IMPL CONNECTIONS SIZE
#   (IMPL: hub (epoll), hub_uring (io_uring), tokio, may or monoio; build
#   first with run.sh or cargo build)
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
IMPL=${1:?IMPL: hub, hub_uring, tokio, may or monoio}
CONNS=${2:?CONNECTIONS}
SIZE=${3:?SIZE}
DURATION="${DURATION:-3}"
PORT="${PORT:-7390}"
. "$ROOT/benches/net-peers/echo_servers.sh"
SPEC=$(echo_server_of "$IMPL")
read -r BIN DRIVER <<<"$SPEC"
LOG="$(mktemp)"
GREENLET_IO_DRIVER=$DRIVER taskset -c 0 strace -c -f -o "$LOG" "$BIN" --addr "127.0.0.1:$PORT" --workers 1 >/dev/null 2>&1 &
PID=$!
wait_for_port "$PORT"
LINE=$(taskset -c 1 "$EX/echo_client" --addr "127.0.0.1:$PORT" --connections "$CONNS" \
    --size "$SIZE" --duration "$DURATION" --workers 1 | grep '^RESULT')
# Stop the server (strace's child): strace then writes its summary.
kill "$(pgrep -P "$PID")"
wait "$PID" 2>/dev/null || true
N=$(sed -n 's/.*requests=\([0-9]*\).*/\1/p' <<<"$LINE")
echo "$IMPL $CONNS x $SIZE B: $N requests"
awk -v n="$N" '
$1 ~ /^[0-9.]+$/ && $4 / n >= 0.005 && NF == 6 && $6 ~ /^[a-z_0-9]+$/ { printf "  %-14s %6.3f calls/req, %6.3f errors/req\n", $6, $4 / n, $5 / n }
$1 ~ /^[0-9.]+$/ && $4 / n >= 0.005 && NF == 5 && $5 ~ /^[a-z_0-9]+$/ { printf "  %-14s %6.3f calls/req\n", $5, $4 / n }
' "$LOG"
rm -f "$LOG"
