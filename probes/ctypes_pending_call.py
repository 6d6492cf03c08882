"""Adding a pending call through a builtin vs through ctypes, under a Python profile function.

Usage: python ctypes_pending_call.py builtin|ctypes|nested-builtin|nested-ctypes
From the main thread, `adder()` adds the pending call `cb` once, either with the
builtin `_testcapi._pending_threadfunc(cb)` or with
`ctypes.pythonapi.Py_AddPendingCall(CFUNCTYPE thunk, NULL)`, then calls `after()`.
A Python profile function (sys.setprofile) records every event whose frame or
C function is one of ours. `cb` calls `probe_fn()` so we can see whether the
profile function is active while the pending call runs.
Prints one line, e.g.
  3.11.7 builtin events=... cb_below=<profiler> cb_profiled=False
where `events` are the profile events in order, `cb_below` the name of the frame
that was running when `cb` ran (the frame below `cb`, or the thunk chain's first
Python frame for ctypes), and `cb_profiled` whether the profile function saw
`probe_fn`'s call. When `cb` runs inside the profile function, `cb_below` names the
event it was called for, e.g. profiler(c_return).
The nested-* modes make `cb` add a second pending call the same way before it
calls `probe_fn()` (nested_pending_call.py's shape under a Python profile function):
they print "finished" or, after 2 s, faulthandler's dump and exit 1.
Observed: see probes/RESULTS.md ("ctypes_pending_call").
"""
import ctypes
import faulthandler
import sys

import _testcapi

MODE = sys.argv[1]
NESTED = MODE.startswith("nested-")
ADD = MODE.removeprefix("nested-")
faulthandler.dump_traceback_later(2 if NESTED else 10, exit=True)
events = []
ran = {}
OURS = {"adder", "after", "cb", "probe_fn", "_pending_threadfunc", "Py_AddPendingCall"}


def probe_fn():
    return 1


def second(*_):
    ran["second"] = True
    return 0


def add(fn):
    if ADD == "builtin":
        _testcapi._pending_threadfunc(fn)
    else:
        ctypes.pythonapi.Py_AddPendingCall(THUNKS[fn], None)


def cb(*_):
    if NESTED:
        add(second)
    below = sys._getframe(1)
    ran["below"] = below.f_code.co_name
    if below.f_code.co_name == "profiler":
        ran["below"] += "(" + below.f_locals["event"] + ")"
    ran["stack"] = []
    f = below
    while f is not None:
        ran["stack"].append(f.f_code.co_name)
        f = f.f_back
    probe_fn()
    return 0


THUNK_TYPE = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p)
THUNKS = {cb: THUNK_TYPE(cb), second: THUNK_TYPE(second)}
ctypes.pythonapi.Py_AddPendingCall.argtypes = [THUNK_TYPE, ctypes.c_void_p]
ctypes.pythonapi.Py_AddPendingCall.restype = ctypes.c_int


def profiler(frame, event, arg):
    if event.startswith("c_"):
        name = getattr(arg, "__name__", repr(arg))
    else:
        name = frame.f_code.co_name
    if name in OURS:
        events.append(f"{event}:{name}")


def after():
    return 2


def adder():
    add(cb)
    after()


sys.setprofile(profiler)
adder()
for _ in range(3):
    pass
sys.setprofile(None)
if NESTED:
    print(sys.version.split()[0], MODE, "finished", "second_ran=" + str(ran.get("second", False)), flush=True)
    sys.exit(0)
print(sys.version.split()[0], MODE, "events=" + ",".join(events),
      "cb_below=" + ran.get("below", "NOT-RUN"),
      "cb_stack=" + ">".join(ran.get("stack", [])),
      "cb_profiled=" + str("call:probe_fn" in events), flush=True)
