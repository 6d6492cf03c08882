"""_Py_FinishPendingCalls: one make_pending_calls (3.11/3.12) or until empty (3.13).

Usage: python finish_pending_calls.py
threading._shutdown, which Py_FinalizeEx calls from C right before
_Py_FinishPendingCalls, is replaced by a C-only call chain that queues `first`,
so no bytecode (no check site) runs in between. `first` adds calls until the
ring is full. A call run by _Py_FinishPendingCalls itself has no Python frame
below it; one run later (at a check site of an atexit function) has one.
Observed: 3.11.7 "first added 31", {None: 31}; 3.12.1 the same;
3.13.0 "first added 32", {None: 32}: one make runs at most 32 calls, `first`
included, so the 32nd ran in a second make of the same _Py_FinishPendingCalls.
"""
import sys, ctypes, functools, threading, atexit
from collections import Counter
CB = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p)
seen = []
def leaf(_):
    below = sys._getframe().f_back
    seen.append(below.f_code.co_name if below else None)
    return 0
LEAF = CB(leaf)
def first(_):
    n = 0
    while ctypes.pythonapi.Py_AddPendingCall(LEAF, None) == 0:
        n += 1
    sys.stdout.write("first added %d\n" % n)
    return 0
FIRST = CB(first)
atexit.register(lambda: print("at atexit, calls run by frame below:", dict(Counter(seen))))
threading._shutdown = functools.partial(ctypes.pythonapi.Py_AddPendingCall, FIRST, None)
print(sys.version.split()[0])
