#!/usr/bin/env bash
# Run greenlet's own test suite (shipped in the sdist as greenlet.tests and installed with it) on
# the builds from port/build.sh.
#
#   port/run_greenlet_tests.sh [--builds robust] [--pythons 3.11.7,3.12.1,3.13.0]
#
# Installs the test extras (objgraph, psutil, setuptools) into each venv, runs
# `python -m unittest discover -v greenlet.tests` from an empty directory (so the installed build is
# tested, not a source tree), and prints one summary line per build x interpreter. Full logs:
# port/work/logs/tests-<build>-<python>.log. Exit status: 0 if every suite passed.
set -uo pipefail
PORT="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
WORK="$PORT/work"
BUILDS=robust
PYTHONS=3.11.7,3.12.1,3.13.0
while [ $# -gt 0 ]; do
    case "$1" in
        --builds) BUILDS="$2"; shift 2 ;;
        --pythons) PYTHONS="$2"; shift 2 ;;
        *) echo "run_greenlet_tests.sh: unknown argument '$1'" >&2; exit 2 ;;
    esac
done
mkdir -p "$WORK/logs" "$WORK/testcwd"
status=0
# Aliases (shielded = robust) name the same build.
BUILDS=$(python3 "$PORT/apply_fix.py" --canonical "$BUILDS") || exit 2
IFS=, read -r -a BL <<< "$BUILDS"
IFS=, read -r -a PL <<< "$PYTHONS"
for b in "${BL[@]}"; do
    for p in "${PL[@]}"; do
        venv="$WORK/venv-$b-$p" log="$WORK/logs/tests-$b-$p.log"
        if [ ! -f "$venv/.greenlet-port-stamp" ]; then
            echo "$b $p: no build (run port/build.sh --variants $b --pythons $p)"; status=1; continue
        fi
        "$venv/bin/python" -m pip install --quiet objgraph psutil setuptools > "$log.pip" 2>&1 \
            || { echo "$b $p: installing the test extras failed, see $log.pip"; status=1; continue; }
        t0=$(date +%s)
        (cd "$WORK/testcwd" && timeout 1800 "$venv/bin/python" -m unittest discover -v greenlet.tests) > "$log" 2>&1
        rc=$?
        summary=$(grep -E '^(Ran [0-9]+ tests|OK|FAILED)' "$log" | tr '\n' ' ')
        echo "$b $p: exit $rc in $(( $(date +%s) - t0 )) s: $summary"
        [ "$rc" = 0 ] || status=1
    done
done
exit $status
