#!/usr/bin/env bash
# Exact per-request costs of the echo servers (hub, tokio current_thread,
# may, monoio; 1 worker) from valgrind's cache simulator: instructions, data reads
# and writes, and L1d / L2 misses per request, under the hub's echo_client.
# Loopback only; every run bounded.
#
#   bash benches/net-peers/cachesim.sh                 # 500 connections x 64 B
#   CONNS=50 SIZE=4096 bash benches/net-peers/cachesim.sh
#   SERVERS="hub tokio" bash benches/net-peers/cachesim.sh
#   (servers: hub (epoll), hub_uring (the hub under io_uring), tokio, may, monoio)
#   SERVERS=hub HUB_ARGS="--stack-kib 60" bash benches/net-peers/cachesim.sh
#
# The server runs under callgrind with --cache-sim=yes. The simulated caches
# are this machine's L1d (48 KiB, 12-way) and, as valgrind's "last level",
# its L2 (1.25 MiB, 20-way): the L3 (48 MiB) holds everything these
# servers touch, so the L2 is the level whose misses cost. In one server
# process the client runs twice, SHORT and LONG seconds, with the counters
# zeroed before and dumped after each run; the difference of the two dumps
# over the difference of the requests served is the steady state, without
# connection setup and teardown.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
PEERS="$ROOT/benches/net-peers"
OUT="$ROOT/target/net-peers/cachesim"
CONNS="${CONNS:-500}"
SIZE="${SIZE:-64}"
SHORT="${SHORT:-4}"
LONG="${LONG:-12}"
SERVERS="${SERVERS:-hub hub_uring tokio may monoio}"
HUB_ARGS="${HUB_ARGS:-}"
# The simulated L2 as size,ways,line (see benches/RESULTS.md: 1310720,320,64 is the
# same capacity indexed by the page offset only, as a physically indexed
# cache sees pages at random frames).
LL="${LL:-1310720,20,64}"
EX="$ROOT/target/release/examples"
PB="$PEERS/target/release"
mkdir -p "$OUT"
command -v valgrind >/dev/null || { echo "cachesim.sh needs valgrind" >&2; exit 2; }
(cd "$ROOT" && cargo build --release --example echo_server --example echo_client)
(cd "$PEERS" && cargo build --release)
declare -A SERVER=([hub]="${HUB_BIN:-$EX/echo_server}" [hub_uring]="${HUB_BIN:-$EX/echo_server}"
    [tokio]="$PB/tokio_echo" [may]="$PB/may_echo" [monoio]="$PB/monoio_echo")
# The hub's I/O driver per column (docs/io.md).
declare -A DRIVER=([hub]=epoll [hub_uring]=io_uring)

wait_port() {
    for _ in $(seq 1 400); do
        if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then return 0; fi
        sleep 0.05
    done
    echo "server on port $1 did not come up" >&2
    return 1
}

# requests served by one client run of $3 seconds against port $1 ($2 = pid)
client() {
    callgrind_control -z "$2" >/dev/null 2>&1
    local n
    n=$(taskset -c 1 "$EX/echo_client" --addr "127.0.0.1:$1" --connections "$CONNS" --size "$SIZE" \
        --duration "$3" --workers 1 | sed -n 's/^RESULT requests=\([0-9]*\).*/\1/p')
    callgrind_control -d "$2" >/dev/null 2>&1
    echo "$n"
}

# the totals line of the newest dump in $1's prefix: Ir Dr Dw I1mr D1mr D1mw ILmr DLmr DLmw
totals() { awk '/^totals:/ {$1 = ""; print}' "$1"; }

PORT=7600
printf "%-9s %10s %9s %9s %9s %9s %9s %9s\n" server requests Ir/req Dr/req Dw/req D1miss/req L2miss/req I1miss/req
for impl in $SERVERS; do
    PORT=$((PORT + 1))
    rm -f "$OUT/$impl".*
    extra=()
    if [ "${impl%_uring}" = hub ] && [ -n "$HUB_ARGS" ]; then read -ra extra <<<"$HUB_ARGS"; fi
    # valgrind 3.19 keeps its big lock across io_uring_enter: an io_uring
    # server whose worker waits in the ring before the listener is bound
    # never binds it (a fresh start does), and it cannot act on SIGTERM
    # while its ring waits (SIGKILL ends it).
    for attempt in 1 2 3; do
        GREENLET_IO_DRIVER="${DRIVER[$impl]:-auto}" taskset -c 0 valgrind --tool=callgrind --cache-sim=yes --D1=49152,12,64 --LL="$LL" \
            --callgrind-out-file="$OUT/$impl.%p" "${SERVER[$impl]}" --addr "127.0.0.1:$PORT" --workers 1 "${extra[@]}" \
            >/dev/null 2>"$OUT/$impl.log" &
        pid=$!
        if wait_port "$PORT"; then break; fi
        kill -KILL "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
        [ "$attempt" -lt 3 ] || exit 1
        PORT=$((PORT + 1))
    done
    n1=$(client "$PORT" "$pid" "$SHORT")
    n2=$(client "$PORT" "$pid" "$LONG")
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 50); do
        case "$(ps -o stat= -p "$pid" 2>/dev/null)" in "" | Z*) break ;; esac
        sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    d1="$OUT/$impl.$pid.1"
    d2="$OUT/$impl.$pid.2"
    paste <(totals "$d1" | tr ' ' '\n' | sed '/^$/d') <(totals "$d2" | tr ' ' '\n' | sed '/^$/d') |
        awk -v impl="$impl" -v n="$((n2 - n1))" '
        { d[NR] = $2 - $1 }
        END {
            printf "%-9s %10d %9.0f %9.0f %9.0f %9.2f %9.2f %9.2f\n", impl, n, d[1] / n, d[2] / n, d[3] / n,
                (d[5] + d[6]) / n, (d[8] + d[9]) / n, d[4] / n
        }'
done
echo "(connections $CONNS, $SIZE B messages; D1 49152,12,64; L2 as valgrind's LL $LL (size,ways,line))"
