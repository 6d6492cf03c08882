#!/usr/bin/env bash
# Run the regression test that port/greenlet-thread-cleanup.patch adds to greenlet's suite
# (src/greenlet/tests/test_thread_state_cleanup.py) against the builds from port/build.sh: the
# same test file on every build, so the stock rows show what it catches.
#
#   port/run_patch_test.sh [--builds stock,robust] [--pythons 3.11.7,3.12.1,3.13.0] [--runs N]
#
# The test file is taken from the patch with `git apply --include`, into a package whose
# __init__ re-exports greenlet.tests.TestCase (the test's `from . import TestCase`), and run with
# `python -m unittest -v` from that directory, so the installed build is tested. Installs the test
# extras greenlet's suite imports (psutil, objgraph) into each venv. Runs the module N times
# (default 1) per build x interpreter and prints one line each: each test's verdicts over the runs
# and the wall time. Full logs: port/work/logs/patch-test-<build>-<python>-<run>.log.
# Exit status: 0 if every run completed (a stock build failing the test is the expected result).
set -uo pipefail
PORT="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
WORK="$PORT/work"
BUILDS=stock,robust
PYTHONS=3.11.7,3.12.1,3.13.0
RUNS=1
usage() { sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
    case "$1" in
        --builds) BUILDS="$2"; shift 2 ;;
        --pythons) PYTHONS="$2"; shift 2 ;;
        --runs) RUNS="$2"; shift 2 ;;
        -h|--help) usage; exit 0 ;;
        *) echo "run_patch_test.sh: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
    esac
done
[[ "$RUNS" =~ ^[1-9][0-9]*$ ]] || { echo "run_patch_test.sh: --runs takes a positive integer, not '$RUNS'" >&2; exit 2; }
BUILDS=$(python3 "$PORT/apply_fix.py" --canonical "$BUILDS") || exit 2
IFS=, read -r -a BL <<< "$BUILDS"
IFS=, read -r -a PL <<< "$PYTHONS"

PKG_ROOT="$WORK/patch-test"
rm -rf "$PKG_ROOT"; mkdir -p "$PKG_ROOT/extract" "$PKG_ROOT/patchtests" "$WORK/logs"
# GIT_CEILING_DIRECTORIES keeps git from resolving the patch's paths against this repository.
(cd "$PKG_ROOT/extract" && GIT_CEILING_DIRECTORIES="$PKG_ROOT" \
    git apply --include='src/greenlet/tests/*' "$PORT/greenlet-thread-cleanup.patch") \
    || { echo "run_patch_test.sh: could not take the test file from the patch" >&2; exit 1; }
TEST_FILE=$(ls "$PKG_ROOT"/extract/src/greenlet/tests/test_*.py)
[ "$(echo "$TEST_FILE" | wc -l)" = 1 ] || { echo "run_patch_test.sh: expected one test file in the patch" >&2; exit 1; }
MODULE=$(basename "$TEST_FILE" .py)
cp "$TEST_FILE" "$PKG_ROOT/patchtests/"
echo "from greenlet.tests import TestCase  # the base class the test imports as '.TestCase'" \
    > "$PKG_ROOT/patchtests/__init__.py"

status=0
for b in "${BL[@]}"; do
    for p in "${PL[@]}"; do
        venv="$WORK/venv-$b-$p" log="$WORK/logs/patch-test-$b-$p"
        if [ ! -f "$venv/.greenlet-port-stamp" ]; then
            echo "$b $p: no build (run port/build.sh --variants $b --pythons $p)"; status=1; continue
        fi
        "$venv/bin/python" -m pip install --quiet objgraph psutil > "$log.pip" 2>&1 \
            || { echo "$b $p: installing the test extras failed, see $log.pip"; status=1; continue; }
        rm -f "$log"-*.log
        t0=$(date +%s.%N)
        for r in $(seq 1 "$RUNS"); do
            (cd "$PKG_ROOT" && timeout 300 "$venv/bin/python" -m unittest -v "patchtests.$MODULE") > "$log-$r.log" 2>&1
            rc=$?
            [ "$rc" -le 1 ] || { echo "$b $p: run $r ended with exit $rc, see $log-$r.log"; status=1; }
        done
        secs=$(echo "$(date +%s.%N) - $t0" | bc)
        verdicts=$(cat "$log"-*.log | grep -E '^test_\w+ .* \.\.\. ' \
                   | sed -E 's/^(test_\w+) .* \.\.\. (\w+).*/\1 \2/' | sort | uniq -c \
                   | awk '{printf "%s %s %d/'"$RUNS"'; ", $2, $3, $1}')
        printf '%s %s: %s runs in %.1f s: %s\n' "$b" "$p" "$RUNS" "$secs" "$verdicts"
    done
done
exit $status
