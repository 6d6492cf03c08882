#!/usr/bin/env bash
# Times CPython's greenlet 3.5.6 on the operations the Rust benches measure.
# Usage (from anywhere): benches/python/run.sh [--kv]   (PYTHON=/path/to/python to choose;
# --kv: every figure as `key value` lines, for benches/peers)
# Creates the venv <repo>/bench-venv (gitignored) on first use.
#   benches/python/run.sh --gevent [gevent_bench.py flags]   gevent 26.9.0's figures for the
#     hub's table instead, in the venv <repo>/bench-venv-gevent (gitignored);
#   benches/python/run.sh --gevent --which                    make that venv, print its python
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
# gevent pulls in a greenlet of its choosing: a venv of its own, so that
# bench-venv keeps greenlet 3.5.6.
if [ "${1:-}" = "--gevent" ]; then
    shift
    venv="$repo/bench-venv-gevent" module=gevent version=26.9.0 script=gevent_bench.py
else
    venv="$repo/bench-venv" module=greenlet version=3.5.6 script=greenlet_bench.py
fi

if [ ! -x "$venv/bin/python" ]; then
    "$python" -m venv "$venv"
fi
if ! "$venv/bin/python" -c "import $module, sys; sys.exit($module.__version__ != '$version')" 2>/dev/null; then
    "$venv/bin/python" -m pip install --quiet "$module==$version" >&2
fi
if [ "${1:-}" = "--which" ]; then
    echo "$venv/bin/python"
    exit 0
fi
exec "$venv/bin/python" "$repo/benches/python/$script" "$@"
