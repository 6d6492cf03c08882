#!/usr/bin/env bash
# Every benchmarked operation in one table: the raw corosensei floor, this
# crate's greenlets and CPython's greenlet 3.5.6, with the issue's targets.
# Runs the criterion benches (switch, lifecycle), the memory example and the
# Python benchmark (which makes its venv on first use), then tabulates them.
# Usage (from anywhere): benches/compare.sh   (takes about two minutes)
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT

echo "running the criterion benches (cargo bench --bench switch --bench lifecycle)..." >&2
cargo bench --quiet --bench switch --bench lifecycle >"$out/criterion.txt" 2>/dev/null
echo "running the memory example..." >&2
cargo run --quiet --release --example memory >"$out/memory.txt"
echo "running CPython's greenlet (benches/python/run.sh)..." >&2
benches/python/run.sh >"$out/python.txt"

# The venv made by run.sh has a Python whatever the machine's default is.
"$repo/bench-venv/bin/python" "$repo/benches/compare.py" \
    "$out/criterion.txt" "$out/memory.txt" "$out/python.txt"
