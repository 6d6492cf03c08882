"""Proposed regression tests for greenlet's thread-state cleanup under tracing.

Written to sit in greenlet/tests (it only needs greenlet and the standard library); here it is run
against the port's builds with `python -m unittest -v test_thread_cleanup_tracing`.

1. A thread that dies while the cleanup pending call runs Python code must not livelock a traced
   main thread (the seed report; hangs on CPython 3.11 with greenlet 3.5.6).
2. Code run by the cleanup is not traced (the documented cost of the fix).
Each scenario runs in a subprocess bounded by faulthandler, so a livelock fails the test instead of
hanging the suite.
"""
import subprocess
import sys
import textwrap
import unittest

SEED = textwrap.dedent("""
    import faulthandler, sys, threading, time, weakref
    import greenlet
    from greenlet._greenlet import get_pending_cleanup_count

    faulthandler.dump_traceback_later(15, exit=True)
    go = threading.Event()
    seen = {}
    refs = []

    def in_cleanup(_):
        go.set()
        end = time.monotonic() + 5
        while not get_pending_cleanup_count() and time.monotonic() < end:
            time.sleep(0.001)
        seen["queued"] = get_pending_cleanup_count() > 0
        (lambda: None)()
        seen["done"] = True

    def first():
        refs.append(weakref.ref(greenlet.getcurrent(), in_cleanup))

    def second():
        greenlet.getcurrent()
        go.wait()

    sys.settrace(lambda *a: None)
    t2 = threading.Thread(target=second); t2.start()
    t1 = threading.Thread(target=first); t1.start(); t1.join()
    end = time.monotonic() + 10
    while not ("done" in seen and not get_pending_cleanup_count()) and time.monotonic() < end:
        time.sleep(0.001)
    t2.join()
    sys.settrace(None)
    print("RESULT", seen.get("queued"), seen.get("done"), get_pending_cleanup_count())
""")

UNTRACED = textwrap.dedent("""
    import sys, threading, time, weakref
    import greenlet
    from greenlet._greenlet import get_pending_cleanup_count

    names = []
    done = []

    def marker():
        return 1

    def tracer(frame, event, arg):
        if event == "call":
            names.append(frame.f_code.co_name)

    refs = []
    def worker():
        refs.append(weakref.ref(greenlet.getcurrent(), lambda r: done.append(marker())))

    sys.settrace(tracer)
    t = threading.Thread(target=worker); t.start(); t.join()
    end = time.monotonic() + 5
    while not done and time.monotonic() < end:
        time.sleep(0.001)
    sys.settrace(None)
    print("RESULT", bool(done), "marker" in names)
""")


def run(script):
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    return proc.returncode, proc.stdout, proc.stderr


class TestThreadCleanupTracing(unittest.TestCase):

    def test_thread_dying_during_cleanup_does_not_livelock_traced_main(self):
        rc, out, err = run(SEED)
        self.assertEqual(rc, 0, f"the traced main thread livelocked or crashed:\n{err}")
        self.assertIn("RESULT True True 0", out)

    def test_cleanup_code_is_not_traced(self):
        rc, out, err = run(UNTRACED)
        self.assertEqual(rc, 0, err)
        self.assertIn("RESULT True False", out)


if __name__ == "__main__":
    unittest.main()
