"""How often a dying thread's greenlet cleanup push runs after the main thread took the GIL.

Usage: <venv with stock greenlet>/bin/python exit_order.py [N]   (default N = 300)
N times: thread T calls greenlet.getcurrent() (so it owns greenlet state, with a weakref
callback on its main greenlet) and returns; the main thread joins it. greenlet queues T's
state from a C++ thread-local destructor (ThreadStateCreator's destructor ->
AddToCleanupQueue + Py_AddPendingCall), which runs after T's Python thread state is gone
and T has released the GIL for the last time. Right after join() returns the main thread
(holding the GIL, running bytecode) looks: if the state is neither queued
(get_pending_cleanup_count() == 0) nor destroyed (the weakref callback has not run), the
push has not happened yet: T's TLS destructor runs after another thread took the GIL.
It looks again after one time.sleep(0) (drop and retake the GIL), then waits (bounded)
until the callback has run.
Prints "<version> n=N late_at_join=<count> late_after_sleep0=<count> lost=<callbacks that
did not run within 1 s>".
Observed: see probes/RESULTS.md ("exit_order").
"""
import faulthandler
import sys
import threading
import time
import weakref

import greenlet
from greenlet._greenlet import get_pending_cleanup_count

faulthandler.dump_traceback_later(120, exit=True)
N = int(sys.argv[1]) if len(sys.argv) > 1 else 300
refs = []
destroyed = set()


def body(i):
    refs.append(weakref.ref(greenlet.getcurrent(), lambda _r, i=i: destroyed.add(i)))


late_at_join = late_after_sleep0 = lost = 0
for i in range(N):
    t = threading.Thread(target=body, args=(i,))
    t.start()
    t.join()
    if get_pending_cleanup_count() == 0 and i not in destroyed:
        late_at_join += 1
        time.sleep(0)
        if get_pending_cleanup_count() == 0 and i not in destroyed:
            late_after_sleep0 += 1
    give_up = time.monotonic() + 1.0
    while i not in destroyed and time.monotonic() < give_up:
        time.sleep(0.0002)
    if i not in destroyed:
        lost += 1
    refs.clear()
faulthandler.cancel_dump_traceback_later()
print(sys.version.split()[0], f"n={N}", f"late_at_join={late_at_join}",
      f"late_after_sleep0={late_after_sleep0}", f"lost={lost}", flush=True)
