"""A cleanup callback switches into a greenlet that was parked under tracing: what is traced?

Usage: <venv>/bin/python greenlet_switch_in_cleanup.py [--gtrace] [--kick=none|b|testcapi]
       (venvs: port/work/venv-stock-<v>, port/work/venv-robust-<v>, made by port/build.sh)
The main thread installs a recording trace function (sys.settrace, returning itself) and,
with --gtrace, a recording greenlet.settrace callback. It starts greenlet G, which calls
`g_before_park()` and switches back to main: G is parked inside traced frames. Thread A
then leaves a weakref callback on its main greenlet and exits; greenlet's deferred cleanup
runs the callback on the main thread inside its pending call (on the `robust` build between
PyThreadState_EnterTracing and LeaveTracing). The callback calls `cb_probe()`, switches into
G (which calls `g_in_cleanup()` and switches back), and calls `cb_probe_after_g()`. After
the cleanup, the main thread calls `main_after_cleanup()` and switches into G once more
(G calls `g_after_cleanup()` and finishes). The callback also starts greenlet H, which
calls `h_in_cleanup()` and parks by switching back (parked inside the cleanup); after the
cleanup the main thread switches into H, which calls `h_after_cleanup()` and finishes.
--kick signals a second pending call before the callback switches into G: `b` lets thread
B (which owns greenlet state) exit and waits until its state is queued (the seed's shape:
stock greenlet schedules a second cleanup call, robust's flag does not); `testcapi` adds
one with _testcapi._pending_threadfunc (no flag can stop it; only the shield helps). On a
livelock faulthandler dumps the tracebacks after 3 s (exit 1): the stuck frame is G's.
Prints one line:
  <version> <build> gtrace=<bool> in_cleanup=<function names the trace function saw while
  the callback and G ran in the cleanup> after=<names it saw afterwards>
  gtrace_events=<greenlet.settrace events as phase:event:origin>target>
  cb_greenlet=<the greenlet current in the callback> ran=<bool> G=.. H=..
  cb_entry_traced=<the trace function saw the callback's own 'call' event>
Observed: see probes/RESULTS.md ("greenlet_switch_in_cleanup").
"""
import faulthandler
import sys
import threading
import time
import weakref

import _testcapi
import greenlet
from greenlet._greenlet import get_pending_cleanup_count

faulthandler.dump_traceback_later(3, exit=True)
GTRACE = "--gtrace" in sys.argv
KICK = next((a.split("=", 1)[1] for a in sys.argv if a.startswith("--kick=")), "none")
WATCH = {"cleanup_cb", "cb_probe", "cb_probe_after_g", "g_in_cleanup", "g_before_park",
         "main_after_cleanup", "g_after_cleanup", "g_body", "h_body", "h_in_cleanup",
         "h_after_cleanup"}
state = {"phase": "setup"}
traced = []
gevents = []
keep = []
NAMES = {}


def name_of(g):
    return NAMES.get(id(g), "other")


def tracer(frame, event, arg):
    if event == "call" and frame.f_code.co_name in WATCH:
        traced.append((state["phase"], frame.f_code.co_name))
    return tracer


def gtracer(event, args):
    origin, target = args
    gevents.append(f"{state['phase']}:{event}:{name_of(origin)}>{name_of(target)}")


def g_before_park():
    return 1


def g_in_cleanup():
    return 2


def g_after_cleanup():
    return 3


def g_body():
    g_before_park()
    back_to = main_glet.switch("parked")
    g_in_cleanup()
    back_to = back_to.switch("done in cleanup")
    g_after_cleanup()
    return "finished"


def h_in_cleanup():
    return 7


def h_after_cleanup():
    return 8


def h_body(back_to):
    h_in_cleanup()
    back_to.switch("H parked")
    h_after_cleanup()
    return "finished"


def cb_probe():
    return 4


def cb_probe_after_g():
    return 5


def main_after_cleanup():
    return 6


def cleanup_cb(_ref):
    state["phase"] = "cleanup"
    state["cb_greenlet"] = name_of(greenlet.getcurrent())
    cb_probe()
    if KICK == "b":
        b_may_exit.set()
        give_up = time.monotonic() + 2
        while get_pending_cleanup_count() == 0 and time.monotonic() < give_up:
            time.sleep(0.001)
        state["b_queued"] = get_pending_cleanup_count() > 0
    elif KICK == "testcapi":
        _testcapi._pending_threadfunc(second_call)
    state["g_said"] = G.switch(greenlet.getcurrent())
    cb_probe_after_g()
    H = greenlet.greenlet(h_body)
    NAMES[id(H)] = "H"
    state["H"] = H
    state["h_said"] = H.switch(greenlet.getcurrent())
    state["ran"] = True
    state["phase"] = "after"


def second_call():
    state["second_call"] = True


def thread_b():
    greenlet.getcurrent()
    b_may_exit.wait()


def thread_a():
    keep.append(weakref.ref(greenlet.getcurrent(), cleanup_cb))


main_glet = greenlet.getcurrent()
G = greenlet.greenlet(g_body)
NAMES[id(main_glet)] = "main"
NAMES[id(G)] = "G"
sys.settrace(tracer)
if GTRACE:
    greenlet.settrace(gtracer)
assert G.switch() == "parked"
state["phase"] = "waiting"
b_may_exit = threading.Event()
b = threading.Thread(target=thread_b, name="B")
b.start()
a = threading.Thread(target=thread_a, name="A")
a.start()
a.join()
for _ in range(5000):
    if state.get("ran"):
        break
    time.sleep(0.001)
if KICK != "b":
    b_may_exit.set()
b.join()
main_after_cleanup()
finished = G.switch()
h_finished = state["H"].switch()
sys.settrace(None)
greenlet.settrace(None)
faulthandler.cancel_dump_traceback_later()
build = "robust" if "robust" in sys.prefix else ("stock" if "stock" in sys.prefix else sys.prefix)
print(sys.version.split()[0], build, f"gtrace={GTRACE}",
      "in_cleanup=" + ",".join(n for p, n in traced if p == "cleanup"),
      "after=" + ",".join(n for p, n in traced if p == "after"),
      "gtrace_events=" + ",".join(e for e in gevents if not e.startswith("setup")),
      f"cb_greenlet={state.get('cb_greenlet')}", f"ran={state.get('ran', False)}",
      f"G={finished}", f"H={h_finished}",
      f"cb_entry_traced={('waiting', 'cleanup_cb') in traced}", f"kick={KICK}",
      f"b_queued={state.get('b_queued', '-')}", f"second_call={state.get('second_call', '-')}", flush=True)
