"""The seed report's reproducer: a thread dies while greenlet's cleanup pending call runs Python code.

Thread A leaves a weakref callback on its main greenlet. When A exits, greenlet queues A's thread
state and schedules its cleanup pending call; the main thread runs it and destroying A's main
greenlet calls the callback. The callback lets thread B (which also owns greenlet state) exit,
waits until B's state is queued, then makes one Python function call. On stock greenlet that
push scheduled a second pending call while the first runs; under a trace or profile function on
CPython 3.11 the call never returns (the main thread spins with the GIL), and faulthandler ends
the process with exit code 1 after --timeout seconds.

Prints `GREEN <b_was_queued_during_cleanup>` and exits 0 when it finishes.
Options: --mode trace|profile|none (default trace), --tracer c|py (see _tracing.py),
--timeout S (default 20).
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


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    _tracing.add_arguments(ap)
    args = ap.parse_args()
    faulthandler.dump_traceback_later(args.timeout, exit=True)

    b_may_exit = threading.Event()
    seen = {}
    keep = []

    def after_a_destroyed(_ref):
        # Runs on the main thread, inside greenlet's cleanup pending call.
        seen["callback_thread_is_main"] = threading.current_thread() is threading.main_thread()
        b_may_exit.set()
        give_up = time.monotonic() + min(10.0, args.timeout / 2)
        while get_pending_cleanup_count() == 0 and time.monotonic() < give_up:
            time.sleep(0.001)
        seen["b_queued"] = get_pending_cleanup_count() > 0

        def first_call_after_b_queued():
            return None

        first_call_after_b_queued()
        seen["returned"] = True

    def thread_a():
        keep.append(weakref.ref(greenlet.getcurrent(), after_a_destroyed))

    def thread_b():
        greenlet.getcurrent()
        b_may_exit.wait()

    _tracing.install(args.mode, args.tracer)

    b = threading.Thread(target=thread_b, name="B")
    b.start()
    a = threading.Thread(target=thread_a, name="A")
    a.start()
    a.join()
    for _ in range(20000):
        time.sleep(0.001)
        if "returned" in seen and get_pending_cleanup_count() == 0:
            break
    b.join()
    _tracing.remove()
    faulthandler.cancel_dump_traceback_later()
    print("GREEN", seen.get("b_queued"), "callback_ran" if "returned" in seen else "callback_missing",
          "left", get_pending_cleanup_count(), "mode", args.mode, "tracer", args.tracer, flush=True)
    return 0 if "returned" in seen else 2


if __name__ == "__main__":
    sys.exit(main())
