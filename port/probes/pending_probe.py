"""Probe: when does the main thread run a pending call added by a thread that does not hold the GIL?

Three cases, each with the main thread in a pure-bytecode loop (function calls and backward jumps,
so it passes eval-breaker check sites all the time, but it never releases the GIL by itself):
  pythread   a threading.Thread releases the GIL, calls Py_AddPendingCall, retakes the GIL, exits
  cthread    a plain C++ thread (no Python thread state, never wants the GIL) calls Py_AddPendingCall
  cthread+sleep  as cthread, but after --spin seconds of not seeing it the main thread calls time.sleep(0.001)
Prints one line per case: latency from the add to the run, on which thread it ran, and whether it
ran during the pure loop at all.
"""
import argparse
import sys
import threading
import time

import _helper_path  # noqa: F401
import porthelper


def f(x):
    return x + 1


def spin_until_ran(limit_s):
    end = porthelper.monotonic_ns() + int(limit_s * 1e9)
    n = 0
    while porthelper.monotonic_ns() < end:
        n = f(n)
        if porthelper.pending_result()[1]:
            return True
    return False


def report(case, ran_in_loop, extra=""):
    added, ran, ident, rc = porthelper.pending_result()
    where = "main" if ident == threading.main_thread().ident else ("none" if not ran else "other")
    lat = f"{(ran - added) / 1e6:.3f}ms" if ran else "not run"
    print(f"python={sys.version.split()[0]} case={case} add_rc={rc} ran_during_pure_loop={ran_in_loop} "
          f"latency={lat} ran_on={where} {extra}".rstrip(), flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--spin", type=float, default=1.0)
    args = ap.parse_args()

    porthelper.reset()
    t = threading.Thread(target=porthelper.add_pending_nogil)
    t.start()
    ran = spin_until_ran(args.spin)
    t.join()
    report("pythread", ran)

    porthelper.reset()
    porthelper.add_pending_from_c_thread(10_000)
    ran = spin_until_ran(args.spin)
    report("cthread", ran)

    porthelper.reset()
    porthelper.add_pending_from_c_thread(10_000)
    ran = spin_until_ran(args.spin)
    if not ran:
        time.sleep(0.001)
        spin_until_ran(0.1)
    report("cthread+sleep", ran, "(then slept 1ms)" if not ran else "")


if __name__ == "__main__":
    main()
