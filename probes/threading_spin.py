"""The seed's livelock when its first function entry is Thread.start() or Thread.join().

Usage: <venv with stock greenlet>/bin/python threading_spin.py lambda|start|join
The seed's shape (port/scenarios/seed.py) under sys.settrace: thread A's weakref callback
runs on the main thread inside greenlet's cleanup pending call, lets B die and waits until
B is queued; then its first function entry is `(lambda: None)()`, `c.start()` (a Thread
made before), or `c.join()` (a Thread started and finished before). Before releasing B
the callback records the frames below it (sys._getframe, a C call: no function entry):
where the main thread was when the cleanup pending call ran.
Prints "<version> <first> finished below=<frames below the callback, innermost first>"
or, on a livelock, "<version> <first> below=..." on stderr and faulthandler's dump after
3 s (exit 1): the stuck frame is the top of the main thread's dump.
Observed: see probes/RESULTS.md ("threading_spin").
"""
import faulthandler
import os
import sys
import threading
import time
import weakref

import greenlet
from greenlet._greenlet import get_pending_cleanup_count

faulthandler.dump_traceback_later(3, exit=True)
FIRST = sys.argv[1]
assert FIRST in ("lambda", "start", "join"), "first entry: lambda|start|join"
seen = {}
keep = []
b_may_exit = threading.Event()
c = threading.Thread(target=lambda: None, name="C")
if FIRST == "join":
    c.start()
    while c.is_alive():
        time.sleep(0.001)


def after_a_destroyed(_ref):
    f = sys._getframe(1)
    below = []
    while f is not None:
        below.append(f"{os.path.basename(f.f_code.co_filename)}:{f.f_code.co_name}")
        f = f.f_back
    seen["below"] = ">".join(below)
    os.write(2, f"{sys.version.split()[0]} {FIRST} below={seen['below']}\n".encode())
    b_may_exit.set()
    give_up = time.monotonic() + 2
    while get_pending_cleanup_count() == 0 and time.monotonic() < give_up:
        time.sleep(0.001)
    if FIRST == "lambda":
        (lambda: None)()
    elif FIRST == "start":
        c.start()
    else:
        c.join()
    seen["returned"] = True


def thread_a():
    keep.append(weakref.ref(greenlet.getcurrent(), after_a_destroyed))


def thread_b():
    greenlet.getcurrent()
    b_may_exit.wait()


sys.settrace(lambda *a: None)
b = threading.Thread(target=thread_b, name="B")
b.start()
a = threading.Thread(target=thread_a, name="A")
a.start()
a.join()
for _ in range(2000):
    time.sleep(0.001)
    if "returned" in seen and get_pending_cleanup_count() == 0:
        break
b.join()
if FIRST != "lambda":
    c.join()
sys.settrace(None)
faulthandler.cancel_dump_traceback_later()
print(sys.version.split()[0], FIRST, "finished", "below=" + seen.get("below", "-"), flush=True)
