"""CPython greenlet timings for the operations benches/switch.rs,
benches/lifecycle.rs and examples/memory.rs measure in Rust.

Run through run.sh (which installs greenlet==3.5.6 in a venv). Each figure is
the best of several repeats of a timed loop, in nanoseconds per operation,
and includes the cost of the Python loop that drives it.
"""

import gc
import os
import platform
import sys
import time

import greenlet
from greenlet import getcurrent

REPEATS = 5
PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")


def best_ns_per_op(run, ops):
    """Runs `run()` REPEATS times; returns the fastest ns per op."""
    best = None
    for _ in range(REPEATS):
        start = time.perf_counter_ns()
        run()
        elapsed = time.perf_counter_ns() - start
        best = elapsed if best is None else min(best, elapsed)
    return best / ops


def switch_round_trip(n=200_000):
    """main -> greenlet -> main: one g.switch() call from the main greenlet."""
    main = getcurrent()

    def body(value):
        while True:
            value = main.switch(value)

    g = greenlet.greenlet(body)
    g.switch(0)

    def run():
        switch = g.switch
        for i in range(n):
            switch(i)

    return best_ns_per_op(run, n)


def ping_pong(n=200_000):
    """A <-> B inside greenlets: per A->B (or B->A) switch."""
    results = []

    def a_body():
        b = b_greenlet
        start = time.perf_counter_ns()
        for _ in range(n):
            b.switch()
        results.append(time.perf_counter_ns() - start)

    def b_body():
        a = a_greenlet
        while True:
            a.switch()

    best = None
    for _ in range(REPEATS):
        a_greenlet = greenlet.greenlet(a_body)
        b_greenlet = greenlet.greenlet(b_body)
        a_greenlet.switch()
        best = results[-1] if best is None else min(best, results[-1])
        b_greenlet.throw()  # kill B, suspended in its loop
    return best / (2 * n)


def create_run_finish(n=100_000):
    """Create a greenlet, switch into it, it returns, drop it."""

    def body(value):
        return value

    def run():
        make = greenlet.greenlet
        for i in range(n):
            make(body).switch(i)

    return best_ns_per_op(run, n)


def kill_suspended(batch=1_000, batches=20):
    """g.throw() (GreenletExit) into a greenlet suspended in a switch, which
    lets it end; creating and suspending the batch is not timed."""
    main = getcurrent()

    def body():
        main.switch()

    best = None
    for _ in range(REPEATS):
        total = 0
        for _ in range(batches):
            victims = [greenlet.greenlet(body) for _ in range(batch)]
            for g in victims:
                g.switch()
            start = time.perf_counter_ns()
            for g in victims:
                g.throw()
            total += time.perf_counter_ns() - start
            assert all(g.dead for g in victims)
        best = total if best is None else min(best, total)
    return best / (batch * batches)


def resident_bytes():
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * PAGE_SIZE


def memory_per_suspended(count=10_000):
    """RSS growth per suspended greenlet, 10,000 of them alive at once."""
    main = getcurrent()

    def body():
        main.switch()

    gc.collect()
    before = resident_bytes()
    alive = [greenlet.greenlet(body) for _ in range(count)]
    for g in alive:
        g.switch()
    after = resident_bytes()
    per = (after - before) / count
    for g in alive:
        g.throw()
    return per



def main():
    print(f"CPython {platform.python_version()}, greenlet {greenlet.__version__}, {platform.machine()}")
    rows = [
        ("switch main<->greenlet, round trip (g.switch from main)", switch_round_trip()),
        ("switch greenlet<->greenlet (A<->B), per switch", ping_pong()),
        ("create + run + finish + drop", create_run_finish()),
        ("kill a suspended greenlet (g.throw())", kill_suspended()),
    ]
    width = max(len(name) for name, _ in rows)
    print(f"{'operation'.ljust(width)}  ns/op")
    for name, ns in rows:
        print(f"{name.ljust(width)}  {ns:8.1f}")
    per = memory_per_suspended()
    print(f"{'RSS per suspended greenlet (10,000 alive)'.ljust(width)}  {per:8.0f} bytes ({per / 1024:.1f} KiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
