"""Which events a trace function and a profile function receive, by what the trace function returns.

Usage: python trace_events.py
Runs `outer()` (which calls `inner()`, a builtin `len`, and raises/catches one
exception) under three hooks and prints, per hook, the events seen for frames of
`outer` and `inner` (line events counted, not listed), as one line each:
  settrace-returns-None:  the global trace function returns None;
  settrace-returns-self:  it returns itself (the local trace function);
  setprofile:             a profile function (its return value is ignored).
Then `spin-with-None-local` runs nested_pending_call.py's shape in a subprocess
(2 s timeout) under `sys.settrace(lambda *a: None)`: a thread whose trace function
returns None still takes 3.11's traced dispatch path, so it hangs there; 3.12 and
3.13 finish.

Observed: see probes/RESULTS.md ("trace_events").
"""
import faulthandler
import sys

faulthandler.dump_traceback_later(10, exit=True)

WATCH = {"outer", "inner"}


def inner():
    return len("ab")


def outer():
    x = inner()
    try:
        raise ValueError(x)
    except ValueError:
        pass
    return x


def run(kind):
    seen = []
    lines = {"n": 0}

    def tracer(frame, event, arg):
        if frame.f_code.co_name in WATCH:
            if event == "line":
                lines["n"] += 1
            else:
                seen.append(f"{event}:{frame.f_code.co_name}")
        return tracer if kind == "settrace-returns-self" else None

    def profiler(frame, event, arg):
        if frame.f_code.co_name in WATCH or event.startswith("c_"):
            name = getattr(arg, "__name__", "") if event.startswith("c_") else frame.f_code.co_name
            if event.startswith("c_") and name != "len":
                return
            seen.append(f"{event}:{name}")

    if kind == "setprofile":
        sys.setprofile(profiler)
        outer()
        sys.setprofile(None)
    else:
        sys.settrace(tracer)
        outer()
        sys.settrace(None)
    print(f"{kind}: events={','.join(seen)} line_events={lines['n']}", flush=True)


def spin_with_none_local():
    """A trace function returning None: does a nested pending call livelock (3.11) or finish?"""
    import subprocess
    code = (
        "import sys, _testcapi\n"
        "def g(): pass\n"
        "def second(): pass\n"
        "def first():\n"
        "    _testcapi._pending_threadfunc(second)\n"
        "    g()\n"
        "sys.settrace(lambda *a: None)\n"
        "_testcapi._pending_threadfunc(first)\n"
        "for _ in range(3): pass\n"
        "print('completed')\n"
    )
    try:
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=2, text=True)
        print(f"spin-with-None-local: finished rc={out.returncode} {out.stdout.strip()}", flush=True)
    except subprocess.TimeoutExpired:
        print("spin-with-None-local: hung (killed after 2 s)", flush=True)


print(sys.version.split()[0], flush=True)
for kind in ("settrace-returns-None", "settrace-returns-self", "setprofile"):
    run(kind)
spin_with_none_local()
