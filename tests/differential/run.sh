#!/usr/bin/env bash
# The differential tester in one command: makes a venv with
# greenlet 3.5.6 for each of pyenv's CPython 3.11.7 and 3.12.1 (first use
# only, under <repo>/difftest-venv, gitignored), builds the Rust
# interpreter, runs the programs on all of them and prints the summary.
# Usage: tests/differential/run.sh [--programs N] [--seed S] [--gen plain|kill-shapes] [--shrink] [--out DIR]
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
pythons=()
for version in ${DIFFTEST_PYTHONS:-3.11.7 3.12.1}; do
    base="$HOME/.pyenv/versions/$version/bin/python"
    if [ ! -x "$base" ]; then
        echo "run.sh: no CPython $version at $base; install it with pyenv or set DIFFTEST_PYTHONS" >&2
        exit 1
    fi
    venv="$repo/difftest-venv/$version"
    if [ ! -x "$venv/bin/python" ]; then
        "$base" -m venv "$venv"
    fi
    if ! "$venv/bin/python" -c 'import greenlet, sys; sys.exit(greenlet.__version__ != "3.5.6")' 2>/dev/null; then
        "$venv/bin/python" -m pip install --quiet 'greenlet==3.5.6'
    fi
    pythons+=(--python "$venv/bin/python")
done
(cd "$repo" && cargo build --release --quiet --example difftest_interp)
exec "${pythons[1]}" "$repo/tests/differential/difftest.py" run "${pythons[@]}" \
    --rust "$repo/target/release/examples/difftest_interp" "$@"
