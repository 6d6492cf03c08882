"""A pending call that adds a second one, then enters a function.

Usage: python nested_pending_call.py trace|pytrace_local|cprofile|pyprofile|cfunc_profile|none
Prints "done [1, 2]" or, on a livelock, faulthandler's dump after 2 s (exit 1).
_testcapi._pending_threadfunc(f) is Py_AddPendingCall(f) from the calling thread.
Observed on 3.11.7: hangs in g() under settrace (Python function) and under
cProfile or a C profile callable (slice); completes under setprofile with a
Python function (its c_return event after the adding call runs `first` with
tracing suspended). 3.12.1 and 3.13.0 complete in every mode.
"""
import faulthandler, sys, time, _testcapi

faulthandler.dump_traceback_later(2, exit=True)
done = []

def g():
    pass

def second():
    done.append(2)

def first():
    _testcapi._pending_threadfunc(second)   # main thread adds while busy
    g()                                     # function entry with calls_to_do set
    done.append(1)

def local_tracer(frame, event, arg):
    return local_tracer

mode = sys.argv[1]
if mode == "trace":
    sys.settrace(lambda *a: None)
elif mode == "pytrace_local":
    sys.settrace(local_tracer)
elif mode == "cprofile":
    import cProfile
    cProfile.Profile().enable()
elif mode == "pyprofile":
    sys.setprofile(lambda *a: None)
elif mode == "cfunc_profile":
    sys.setprofile(slice)                   # a C callable taking (frame, event, arg)
_testcapi._pending_threadfunc(first)
for _ in range(100):
    time.sleep(0.001)
    if len(done) == 2:
        break
print(sys.version.split()[0], mode, "done", done)
