#!/usr/bin/env bash
# What _Py_FinishPendingCalls tests before its first make_pending_calls.
#
# Usage: probes/finish_pending_calls_entry.sh [VERSION...]   (default: 3.11.7 3.12.1 3.13.0)
# Prints, for each pyenv CPython, the instructions of _Py_FinishPendingCalls
# up to its first call of make_pending_calls (gdb on the installed libpython).
# Observed: 3.11.7 loads pending.calls_to_do and returns when it is 0; 3.12.1
# calls make_pending_calls with no test at all; 3.13.0 neither (then loops
# while npending > 0, see finish_pending_calls.py).
set -euo pipefail
for version in "${@:-3.11.7 3.12.1 3.13.0}"; do
    for v in $version; do
        lib=$(ls "$HOME/.pyenv/versions/$v/lib/"libpython3*.so.1.0)
        echo "== $v"
        gdb -batch -ex "disassemble _Py_FinishPendingCalls" "$lib" 2>/dev/null |
            sed -n '/<+0>/,/make_pending_calls>/p'
    done
done
