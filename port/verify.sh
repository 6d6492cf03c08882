#!/usr/bin/env bash
# Run every scenario N times on every build x interpreter and print one table, next to the Rust
# model's predictions for the same cells.
#
#   port/verify.sh [--quick] [--runs N] [--builds LIST] [--pythons LIST] [--scenarios LIST]
#                  [--modes ctrace,trace,profile,pyprofile,none] [--timeout S] [--jobs J] [--model-dir DIR] [--no-model]
# Builds: stock, seed, scheduled, robust (shielded = robust). The robust rows also show the model's
# shielded verdict. Port modes are matched to the explorer's mode names (ctrace -> trace where the
# explorer has no ctrace); a cell the model does not have says "no cell".
#
# --quick: 2 runs per cell, ctrace mode only, 6 s hang timeout, shorter churn (under 5 minutes once
# the builds exist). Default: 5 runs, modes ctrace,trace,profile,pyprofile, 10 s timeout. Builds come from
# port/build.sh (run it first). The model's columns come from `cargo run --release --example
# explore|matrix` in --model-dir (default: this repository); if those fail, the table says
# "unavailable" with the reason. Not part of the default test command: it needs the builds.
set -euo pipefail
PORT="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
exec python3 "$PORT/verify.py" "$@"
