#!/usr/bin/env bash
# The greenlet peer table: this crate's greenlets side by side with raw
# corosensei, generator 0.8 and context 3.0 (one binary, interleaved batches,
# medians; instructions per operation under callgrind) and CPython's
# greenlet 3.5.6 (benches/python/run.sh, which makes its venv on first use).
# Usage (from anywhere): benches/peers/run.sh [peers table flags, e.g. --no-callgrind]
# Takes about five minutes; every child and step is bounded in time.
#   benches/peers/run.sh hub [--callgrind] [peers hub flags]   the hub's table instead:
#   the hub beside tokio, may, gevent 26.9.0 (benches/python/run.sh --gevent makes its
#   venv) and raw corosensei, with the targets; writes benches/hub_ratios.svg.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$here"
echo "building benches/peers (cargo build --release)..." >&2
cargo build --quiet --release
echo "peers run of $(date -u '+%Y-%m-%d %H:%M UTC'), $(git -C "$here" rev-parse --short HEAD 2>/dev/null || echo 'no git'), $(nproc) CPUs"
if [ "${1:-}" = "hub" ]; then
    shift
    exec timeout 3600 "$here/target/release/peers" hub "$@"
fi
exec timeout 1800 "$here/target/release/peers" table "$@"
