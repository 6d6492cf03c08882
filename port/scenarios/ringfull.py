"""A thread dies while CPython's pending-call ring is full, so greenlet cannot schedule its cleanup.

Thread A owns greenlet state and exits slowly (its state is queued 50 ms after its last GIL
release). Meanwhile the main thread, without the GIL, fills the pending-call ring with no-op calls
(porthelper.fill_ring_and_wait), so A's Py_AddPendingCall fails (greenlet prints a warning). Then
the ring drains and a second thread C exits normally. With a policy that schedules only when the
queue size becomes 1 (stock, seed), C's push sees size 2 and schedules nothing: both states stay
queued forever (a leak). With `scheduled`/`robust` the failed schedule cleared the flag, C's push
schedules again, and the queue empties.

Prints `RINGFULL ok|leak ...` and exits 0; exit 1 = hang (faulthandler). Needs porthelper.
Options: --mode trace|profile|none (default none), --tracer c|py, --timeout S.
"""
import argparse
import faulthandler
import sys
import threading
import time
import weakref

import greenlet
from greenlet._greenlet import get_pending_cleanup_count

import _tracing


def wait_for_queue(limit_s):
    end = time.monotonic() + limit_s
    while get_pending_cleanup_count() and time.monotonic() < end:
        time.sleep(0.002)
    return get_pending_cleanup_count()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    _tracing.add_arguments(ap)
    ap.set_defaults(mode="none")
    args = ap.parse_args()
    if _tracing.porthelper is None:
        raise SystemExit("ringfull needs porthelper: run port/build.sh")
    helper = _tracing.porthelper
    faulthandler.dump_traceback_later(args.timeout, exit=True)
    _tracing.install(args.mode, args.tracer)

    destroyed = []
    keep = []
    a_ready, a_go = threading.Event(), threading.Event()

    def thread_a():
        keep.append(weakref.ref(greenlet.getcurrent(), lambda r: destroyed.append("A")))
        helper.slow_thread_exit(50_000)
        a_ready.set()
        a_go.wait()

    def thread_c():
        keep.append(weakref.ref(greenlet.getcurrent(), lambda r: destroyed.append("C")))

    a = threading.Thread(target=thread_a)
    a.start()
    a_ready.wait()
    a_go.set()
    added = helper.fill_ring_and_wait(300_000)
    a.join()
    after_a = wait_for_queue(0.5)
    c = threading.Thread(target=thread_c)
    c.start()
    c.join()
    final = wait_for_queue(2.0)
    _tracing.remove()
    faulthandler.cancel_dump_traceback_later()
    print(f"RINGFULL {'leak' if final else 'ok'} noops_added={added} queued_after_A={after_a} "
          f"queued_at_end={final} destroyed={''.join(sorted(destroyed)) or '-'} mode={args.mode}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
