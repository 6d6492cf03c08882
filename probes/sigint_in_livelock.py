"""SIGINT sent while the seed's livelock spins (stock greenlet 3.5.6, sys.settrace): what escapes?

Usage: <venv with stock greenlet>/bin/python sigint_in_livelock.py default|ignore|python
       [--shape seed|testcapi] [--mode trace|none] [--no-source]
shape seed (default): port/scenarios/seed.py's two threads: thread A's weakref callback runs
on the main thread inside greenlet's cleanup pending call, lets B die, waits until B is
queued, then calls `first_call_after_b_queued()`: on 3.11 under tracing that entry spins.
shape testcapi: nested_pending_call.py's shape without greenlet: pending call `first` adds
`second` with _testcapi._pending_threadfunc and calls `first_call_after_b_queued()`.
A kicker thread polls until the callback is about to make that call (a dict store, so
that call is the first function entry after B is queued), waits 0.3 s, sends
SIGINT to the main thread (handler: default_int_handler, SIG_IGN, or a Python function),
waits 1 s and, if the main thread has not finished, dumps every thread's traceback
(faulthandler.dump_traceback, to stderr): where the main thread is then. A 4 s
faulthandler.dump_traceback_later(exit=True) ends a run that never finishes (exit 1).
--no-source runs the same code compiled under a file name that does not exist, so the
unraisable hook's traceback of the weakref callback reads no source line (reading one runs
Python code: the text decoder's __init__ in codecs).
Prints one line:
  <version> <shape> <handler> <mode> escaped=<exception type caught around the call or ->
  escaped_from=<innermost traceback frame> callback_done=<True|False> main_got=<exception
  seen by the main thread's wait loop or -> main_got_in=<frame> handler_ran_in=<frame the
  Python handler ran in> left=<states still queued (seed)>
Observed: see probes/RESULTS.md ("sigint_in_livelock").
"""
import argparse
import faulthandler
import os
import signal
import sys
import threading
import time
import weakref

ap = argparse.ArgumentParser()
ap.add_argument("handler", choices=("default", "ignore", "python"))
ap.add_argument("--shape", choices=("seed", "testcapi"), default="seed")
ap.add_argument("--mode", choices=("trace", "none"), default="trace")
ap.add_argument("--no-source", action="store_true",
                help="run this file's code compiled under a name that is no file, so that a "
                     "traceback printed by the unraisable hook reads no source line")
args = ap.parse_args()
if args.no_source and "__file__" in globals():
    with open(__file__) as f:
        code = compile(f.read(), "<no source file>", "exec")
    exec(code, {"__name__": "__main__"})
    sys.exit(0)
faulthandler.dump_traceback_later(4, exit=True)

MAIN = threading.get_ident()
seen = {}
finished = threading.Event()


def innermost(tb):
    while tb.tb_next is not None:
        tb = tb.tb_next
    return tb.tb_frame.f_code.co_name


def on_sigint(signum, frame):
    seen["handler_ran_in"] = frame.f_code.co_name if frame else "None"


signal.signal(signal.SIGINT, {"default": signal.default_int_handler, "ignore": signal.SIG_IGN,
                              "python": on_sigint}[args.handler])


def first_call_after_b_queued():
    return None


def settled():
    """SIGINT was sent at least 0.2 s ago (a KeyboardInterrupt would have arrived by then)."""
    return "sent" in seen and time.monotonic() > seen["sent"] + 0.2


def kicker():
    give_up = time.monotonic() + 3
    while "armed" not in seen and time.monotonic() < give_up:
        time.sleep(0.005)
    time.sleep(0.3)
    signal.pthread_kill(MAIN, signal.SIGINT)
    seen["sent"] = time.monotonic()
    if not finished.wait(1.0):
        print("== kicker: main thread not finished 1 s after SIGINT; tracebacks:", file=sys.stderr, flush=True)
        faulthandler.dump_traceback(all_threads=True)


threading.Thread(target=kicker, daemon=True, name="kicker").start()

if args.shape == "seed":
    import greenlet
    from greenlet._greenlet import get_pending_cleanup_count

    b_may_exit = threading.Event()
    keep = []

    def after_a_destroyed(_ref):
        b_may_exit.set()
        give_up = time.monotonic() + 2
        while get_pending_cleanup_count() == 0 and time.monotonic() < give_up:
            time.sleep(0.001)
        seen["armed"] = True  # a plain store: the next function entry must be the one below
        try:
            first_call_after_b_queued()
        except BaseException as e:  # noqa: BLE001 - record what escapes (no call here), re-raise
            seen["escaped_exc"] = e
            tb = e.__traceback__
            while tb.tb_next is not None:
                tb = tb.tb_next
            os.write(2, f"== escaped the call: {type(e).__name__} from {tb.tb_frame.f_code.co_name}\n".encode())
            seen["callback_done"] = True
            raise
        seen["callback_done"] = True

    def thread_a():
        keep.append(weakref.ref(greenlet.getcurrent(), after_a_destroyed))

    def thread_b():
        greenlet.getcurrent()
        b_may_exit.wait()

    if args.mode == "trace":
        sys.settrace(lambda *a: None)
    try:
        b = threading.Thread(target=thread_b, name="B")
        b.start()
        a = threading.Thread(target=thread_a, name="A")
        a.start()
        a.join()
        for _ in range(3000):
            time.sleep(0.001)
            if seen.get("callback_done") and get_pending_cleanup_count() == 0 and settled():
                break
        b.join()
    except BaseException as e:  # noqa: BLE001
        seen["main_got"] = type(e).__name__
        seen["main_got_in"] = innermost(e.__traceback__)
    left = get_pending_cleanup_count()
else:
    import _testcapi

    def second():
        seen["second"] = True

    def first():
        _testcapi._pending_threadfunc(second)
        seen["armed"] = True  # a plain store: the next function entry must be the one below
        try:
            first_call_after_b_queued()
        except BaseException as e:  # noqa: BLE001 - record what escapes (no call here), re-raise
            seen["escaped_exc"] = e
            tb = e.__traceback__
            while tb.tb_next is not None:
                tb = tb.tb_next
            os.write(2, f"== escaped the call: {type(e).__name__} from {tb.tb_frame.f_code.co_name}\n".encode())
            seen["callback_done"] = True
            raise
        seen["callback_done"] = True

    if args.mode == "trace":
        sys.settrace(lambda *a: None)
    try:
        _testcapi._pending_threadfunc(first)
        for _ in range(3000):
            time.sleep(0.001)
            if seen.get("callback_done") and settled():
                break
    except BaseException as e:  # noqa: BLE001
        seen["main_got"] = type(e).__name__
        seen["main_got_in"] = innermost(e.__traceback__)
    left = "-"
sys.settrace(None)
finished.set()
faulthandler.cancel_dump_traceback_later()
if "escaped_exc" in seen:
    seen["escaped"] = type(seen["escaped_exc"]).__name__
    seen["escaped_from"] = innermost(seen["escaped_exc"].__traceback__)
print(sys.version.split()[0], args.shape, args.handler, args.mode,
      *(f"{k}={seen.get(k, '-')}" for k in ("escaped", "escaped_from", "callback_done", "main_got",
                                            "main_got_in", "handler_ran_in")),
      f"left={left}", flush=True)
