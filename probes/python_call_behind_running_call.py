"""A Python-level pending call queued behind a running pending call spins at its own entry (3.11).

Usage: python python_call_behind_running_call.py
Pending call `first` adds `second` with _testcapi._pending_threadfunc and returns at once
(no function entry of its own after the add). The same make_pending_calls loop pops
`second` while calls_to_do is still set (it was signalled after the loop's unsignal), so
under sys.settrace on 3.11 `second`'s own traced RESUME re-dispatches for ever.
Prints "<version> done [1, 2]" or faulthandler's dump after 2 s (exit 1).
Observed: see probes/RESULTS.md ("python_call_behind_running_call").
"""
import faulthandler
import sys

import _testcapi

faulthandler.dump_traceback_later(2, exit=True)
done = []


def second():
    done.append(2)


def first():
    _testcapi._pending_threadfunc(second)
    done.append(1)


sys.settrace(lambda *a: None)
_testcapi._pending_threadfunc(first)
for _ in range(3):
    pass
sys.settrace(None)
print(sys.version.split()[0], "done", done, flush=True)
