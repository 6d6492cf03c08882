#!/usr/bin/env bash
# Times CPython's greenlet 3.5.6 on the operations the Rust benches measure.
# Usage (from anywhere): benches/python/run.sh [--kv]   (PYTHON=/path/to/python to choose;
# --kv: every figure as `key value` lines, for benches/peers)
# Creates the venv <repo>/bench-venv (gitignored) on first use.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# The interpreter: $PYTHON if set, else pyenv's 3.11.7 (the version the
# figures in the README were taken with), else python3.11, else python3.
if [ -n "${PYTHON:-}" ]; then
    python="$PYTHON"
elif [ -x "$HOME/.pyenv/versions/3.11.7/bin/python" ]; then
    python="$HOME/.pyenv/versions/3.11.7/bin/python"
elif command -v python3.11 >/dev/null; then
    python="$(command -v python3.11)"
elif command -v python3 >/dev/null; then
    python="$(command -v python3)"
else
    echo "run.sh: no Python found; install CPython 3 or set PYTHON=/path/to/python" >&2
    exit 1
fi
venv="$repo/bench-venv"

if [ ! -x "$venv/bin/python" ]; then
    "$python" -m venv "$venv"
fi
if ! "$venv/bin/python" -c 'import greenlet, sys; sys.exit(greenlet.__version__ != "3.5.6")' 2>/dev/null; then
    "$venv/bin/python" -m pip install --quiet 'greenlet==3.5.6'
fi
exec "$venv/bin/python" "$repo/benches/python/greenlet_bench.py" "$@"
