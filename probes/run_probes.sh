#!/usr/bin/env bash
# Run the probes on pyenv's CPython 3.11.7, 3.12.1 and 3.13.0 and print their results.
#
# Usage: probes/run_probes.sh [--repeat N]   (N: runs of the probes whose result varies; default 3)
# Needs port/work/venv-{stock,robust}-<version> (port/build.sh --variants stock,robust).
# Every probe bounds itself (faulthandler.dump_traceback_later(t, exit=True)); each run also
# has a `timeout` backstop. A hang prints "HANG(rc=N)" and the top frames of the main thread's
# dump (the lines after the last "Thread ... (most recent call first):" of faulthandler's
# timeout dump, up to 4 frames). The output is what probes/RESULTS.md quotes.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
P="$ROOT/probes"
REPEAT=3
while [ $# -gt 0 ]; do
    case "$1" in
        --repeat) REPEAT="$2"; shift 2 ;;
        -h|--help) sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "run_probes.sh: unknown argument '$1'" >&2; exit 2 ;;
    esac
done
VERSIONS="3.11.7 3.12.1 3.13.0"
py() { echo "$HOME/.pyenv/versions/$1/bin/python"; }
venv() { echo "$ROOT/port/work/venv-$1-$2/bin/python"; }
for v in $VERSIONS; do
    for b in stock robust; do
        [ -x "$(venv $b $v)" ] || { echo "run_probes.sh: no $(venv $b $v); run port/build.sh --variants stock,robust" >&2; exit 2; }
    done
done

# run LABEL PYTHON ARGS...: one run; prints stdout's result lines, or HANG and the stuck frames.
run() {
    local label="$1"; shift
    local out err rc
    out=$(mktemp); err=$(mktemp)
    timeout 30 "$@" >"$out" 2>"$err"; rc=$?
    if [ $rc -eq 0 ]; then
        sed "s|^|$label: |" "$out"
    else
        echo "$label: HANG(rc=$rc) main thread top frames:" \
            "$(awk '/^Timeout \(/{t=1; next} t && /most recent call first/{n=0; buf=""; next}
                    t && /^  File/ && n<4 {sub(/^  File "/, ""); sub(/^[^"]*\//, ""); sub(/"/, ""); buf=buf (n?" <- ":"") $0; n++}
                    END{print buf}' "$err")"
    fi
    grep -h '^== escaped' "$err" | sed "s|^|$label: |"
    rm -f "$out" "$err"
}

echo "== trace_events"
for v in $VERSIONS; do run "$v" "$(py $v)" "$P/trace_events.py"; done

echo "== ctypes_pending_call"
for v in $VERSIONS; do for m in builtin ctypes nested-builtin nested-ctypes; do
    run "$v $m" "$(py $v)" "$P/ctypes_pending_call.py" $m
done; done

echo "== python_call_behind_running_call"
for v in $VERSIONS; do run "$v" "$(py $v)" "$P/python_call_behind_running_call.py"; done

echo "== signal_handlers (x$REPEAT; raised_in/handler_caller vary with the check site hit)"
for v in $VERSIONS; do
    for _ in $(seq "$REPEAT"); do "$(py $v)" "$P/signal_handlers.py"; done | sort | uniq -c
done

echo "== sigint_in_livelock (stock greenlet 3.5.6, sys.settrace)"
for v in $VERSIONS; do for shape in seed testcapi; do for h in default ignore python; do
    run "$v $shape $h" "$(venv stock $v)" "$P/sigint_in_livelock.py" $h --shape $shape
done; done; done
for v in $VERSIONS; do
    run "$v seed default --no-source" "$(venv stock $v)" "$P/sigint_in_livelock.py" default --no-source
done

echo "== greenlet_switch_in_cleanup"
for v in $VERSIONS; do for b in stock robust; do
    for a in "" --gtrace --kick=b --kick=testcapi; do
        run "$v $b ${a:-plain}" "$(venv $b $v)" "$P/greenlet_switch_in_cleanup.py" $a
    done
done; done

echo "== threading_spin (stock greenlet 3.5.6, sys.settrace)"
for v in $VERSIONS; do for f in lambda start join; do
    run "$v $f" "$(venv stock $v)" "$P/threading_spin.py" $f
done; done

echo "== exit_order (stock greenlet 3.5.6; x$REPEAT; load average: $(cut -d' ' -f1-3 /proc/loadavg))"
for v in $VERSIONS; do for _ in $(seq "$REPEAT"); do
    run "$v" "$(venv stock $v)" "$P/exit_order.py" 300
done; done
