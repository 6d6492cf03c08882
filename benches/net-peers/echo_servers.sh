# Sourced by the echo measurement scripts (cpusplit.sh, perfsplit.sh,
# syscalls.sh): which binary and I/O driver each server name means, and
# the wait for a started server's port. Needs ROOT (the repository).
EX="$ROOT/target/release/examples"
PB="$ROOT/benches/net-peers/target/release"

# echo_server_of NAME -> "PATH DRIVER": hub (epoll), hub_uring (io_uring),
# tokio, may, monoio, or NAME=PATH[:DRIVER] for another build (DRIVER is
# GREENLET_IO_DRIVER, epoll when left out).
echo_server_of() {
    case "$1" in
    hub) echo "$EX/echo_server epoll" ;;
    hub_uring) echo "$EX/echo_server io_uring" ;;
    tokio | may | monoio) echo "$PB/${1}_echo epoll" ;;
    *=*)
        local spec=${1#*=}
        local path=${spec%%:*} driver=epoll
        [ "$spec" != "$path" ] && driver=${spec#*:}
        [ -x "$path" ] || { echo "$path is not an executable" >&2; exit 2; }
        echo "$path $driver" ;;
    *) echo "a server is hub, hub_uring, tokio, may, monoio or NAME=PATH[:DRIVER], not $1" >&2; exit 2 ;;
    esac
}

# wait_for_port PORT: until 127.0.0.1:PORT accepts, at most 5 s.
wait_for_port() {
    for _ in $(seq 1 100); do
        if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then return; fi
        sleep 0.05
    done
}
