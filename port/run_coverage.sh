#!/usr/bin/env bash
# coverage.py with --concurrency=greenlet,thread on the churn load, before (stock) and after (robust).
#
#   port/run_coverage.sh [--builds stock,robust] [--pythons 3.11.7,3.12.1,3.13.0] [--runs N] [--timeout S]
#                        [--delay-us US]   (sets GREENLET_TEST_DRAIN_EXIT_DELAY_US, the test-only window widening)
#
# Installs coverage into each venv, runs
#   coverage run --concurrency=greenlet,thread scenarios/churn.py --mode none --slow-exit-us 3000
# N times (churn installs no tracer of its own: coverage's C tracer is the tracer), and prints per
# build x interpreter: hangs/N (faulthandler ended the run), finished/N, whether `coverage json`
# then completed, and whether coverage recorded the lines of the weakref callback that greenlet's
# cleanup runs (the cost of the robust build: those lines are not traced).
set -uo pipefail
PORT="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
WORK="$PORT/work"
BUILDS=stock,robust
PYTHONS=3.11.7,3.12.1,3.13.0
RUNS=3
TIMEOUT=20
DELAY_US=
while [ $# -gt 0 ]; do
    case "$1" in
        --builds) BUILDS="$2"; shift 2 ;;
        --pythons) PYTHONS="$2"; shift 2 ;;
        --runs) RUNS="$2"; shift 2 ;;
        --timeout) TIMEOUT="$2"; shift 2 ;;
        --delay-us) DELAY_US="$2"; shift 2 ;;
        *) echo "run_coverage.sh: unknown argument '$1'" >&2; exit 2 ;;
    esac
done
unset GREENLET_TEST_DRAIN_EXIT_DELAY_US
[ -n "$DELAY_US" ] && export GREENLET_TEST_DRAIN_EXIT_DELAY_US="$DELAY_US"
# Aliases (shielded = robust) name the same build.
BUILDS=$(python3 "$PORT/apply_fix.py" --canonical "$BUILDS") || exit 2
IFS=, read -r -a BL <<< "$BUILDS"
IFS=, read -r -a PL <<< "$PYTHONS"
printf '%-9s %-7s %-6s %-9s %-14s %-10s %s\n' build python hangs finished "coverage json" callback "coverage version"
for b in "${BL[@]}"; do
    for p in "${PL[@]}"; do
        venv="$WORK/venv-$b-$p" dir="$WORK/coverage/$b-$p${DELAY_US:+-delay$DELAY_US}"
        [ -f "$venv/.greenlet-port-stamp" ] || { echo "$b $p: no build"; continue; }
        "$venv/bin/python" -m pip install --quiet coverage > /dev/null 2>&1 || { echo "$b $p: pip install coverage failed"; continue; }
        rm -rf "$dir"; mkdir -p "$dir"
        hangs=0 fin=0 json_ok=0 cb_lines=""
        for i in $(seq 1 "$RUNS"); do
            (cd "$dir" && "$venv/bin/python" -m coverage run --data-file="$dir/.coverage.$i" \
                --concurrency=greenlet,thread "$PORT/scenarios/churn.py" --mode none \
                --slow-exit-us 3000 --timeout "$TIMEOUT") > "$dir/run-$i.log" 2>&1
            rc=$?
            if [ $rc = 1 ] && grep -q "Timeout (" "$dir/run-$i.log"; then hangs=$((hangs + 1)); continue; fi
            [ $rc = 0 ] && grep -q "^CHURN" "$dir/run-$i.log" || continue
            fin=$((fin + 1))
            if (cd "$dir" && "$venv/bin/python" -m coverage json --data-file="$dir/.coverage.$i" \
                    -o "$dir/cov-$i.json" --include="*churn.py") > "$dir/json-$i.log" 2>&1; then
                json_ok=$((json_ok + 1))
                cb_lines=$("$venv/bin/python" "$PORT/coverage_callback_lines.py" "$PORT/scenarios/churn.py" "$dir/cov-$i.json")
            fi
        done
        ver=$("$venv/bin/python" -m coverage --version 2>/dev/null | head -1 | awk '{print $3}')
        printf '%-9s %-7s %-6s %-9s %-14s %-10s %s\n' "$b" "$p" "$hangs/$RUNS" "$fin/$RUNS" "$json_ok/$fin" "${cb_lines:-n/a}" "$ver"
    done
done
