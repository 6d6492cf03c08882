"""A coverage.py-like churn load on greenlet's thread-exit cleanup.

Waves of short-lived threads each touch greenlet (so they own a greenlet thread state), switch
into a child greenlet, and leave a weakref callback on their main greenlet, as coverage.py's
tracer does by keying a WeakKeyDictionary on greenlet.getcurrent() in every thread. When a thread
exits, greenlet destroys its state in a pending call on the main thread, and the callback runs
there: it calls Python functions and releases the GIL (time.sleep(0) and a short sleep) in the
middle. Meanwhile the main thread calls Python functions in a loop under sys.settrace (or
sys.setprofile, or neither), so thread deaths keep overlapping the cleanup.

Exit codes: 0 finished (one line starting with CHURN), 1 hang (faulthandler dumped the stacks
after --timeout seconds and ended the process).
Options: --mode trace|profile|none, --tracer c|py (see _tracing.py), --threads N (per wave),
--waves W, --timeout S, --settle S (how long to wait at the end for the queue to empty before
calling it a leak), --slow-exit-us US (each thread's exit, after its last GIL release and before
greenlet queues its state, takes a random 0..US microseconds, as with a slow library destructor or
a descheduled thread; needs porthelper).
"""
import argparse
import faulthandler
import random
import sys
import threading
import time
import weakref

import greenlet
from greenlet._greenlet import get_pending_cleanup_count

import _tracing


def square(x):
    return x * x


def small_work(n):
    total = 0
    for i in range(n):
        total += square(i)
    return total


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    _tracing.add_arguments(ap)
    ap.add_argument("--threads", type=int, default=8)
    ap.add_argument("--waves", type=int, default=60)
    ap.add_argument("--slow-exit-us", type=int, default=0)
    ap.add_argument("--settle", type=float, default=3.0)
    ap.add_argument("--seed", type=int, default=None)
    args = ap.parse_args()
    faulthandler.dump_traceback_later(args.timeout, exit=True)
    rng = random.Random(args.seed)

    registry = weakref.WeakKeyDictionary()   # like coverage's per-greenlet data
    refs = set()
    lock = threading.Lock()
    counts = {"callbacks": 0, "threads": 0, "main_calls": 0, "off_main": 0}

    def on_main_greenlet_gone(ref):
        # Runs inside greenlet's cleanup pending call (the main thread, GIL held).
        refs.discard(ref)
        if threading.current_thread() is not threading.main_thread():
            counts["off_main"] += 1
        counts["callbacks"] += 1
        small_work(5)
        time.sleep(0)            # drop and retake the GIL: the main thread recomputes its eval breaker
        small_work(5)            # traced calls after the retake
        time.sleep(0.0002)       # let other threads run and die; return to the drain right after the retake

    if args.slow_exit_us and _tracing.porthelper is None:
        raise SystemExit("--slow-exit-us needs porthelper: run port/build.sh")

    def worker(delay, exit_us):
        _tracing.install(args.mode, args.tracer)
        main_glet = greenlet.getcurrent()
        if exit_us:
            _tracing.porthelper.slow_thread_exit(exit_us)
        registry[main_glet] = threading.get_ident()
        ref = weakref.ref(main_glet, on_main_greenlet_gone)
        with lock:
            refs.add(ref)
            counts["threads"] += 1
        child = greenlet.greenlet(lambda: small_work(3) + greenlet.getcurrent().parent.switch())
        child.switch()
        time.sleep(delay)

    _tracing.install(args.mode, args.tracer)

    started = time.monotonic()
    for _ in range(args.waves):
        wave = [threading.Thread(target=worker,
                                 args=(rng.random() * 0.002, int(rng.random() * args.slow_exit_us)))
                for _ in range(args.threads)]
        for t in wave:
            t.start()
        while any(t.is_alive() for t in wave):
            small_work(20)
            counts["main_calls"] += 1
            time.sleep(0.0001)
        for t in wave:
            t.join()
    settle_end = time.monotonic() + args.settle
    while (get_pending_cleanup_count() or counts["callbacks"] < counts["threads"]) \
            and time.monotonic() < settle_end:
        small_work(5)
        time.sleep(0.001)
    elapsed = time.monotonic() - started
    _tracing.remove()
    faulthandler.cancel_dump_traceback_later()
    left = get_pending_cleanup_count()
    missing = counts["threads"] - counts["callbacks"]
    verdict = "leak" if (left or missing) else "ok"
    print(f"CHURN {verdict} mode={args.mode} tracer={args.tracer} slow_exit_us={args.slow_exit_us} threads={counts['threads']} callbacks={counts['callbacks']} "
          f"queue_left={left} callbacks_missing={missing} off_main={counts['off_main']} "
          f"main_loop_iterations={counts['main_calls']} elapsed={elapsed:.2f}s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
