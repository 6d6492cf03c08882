"""CPython greenlet timings for the operations benches/switch.rs,
benches/lifecycle.rs and benches/drivers/memory.rs measure in Rust.

Run through run.sh (which installs greenlet==3.5.6 in a venv). Each figure is
the best of several repeats of a timed loop, in nanoseconds per operation,
and includes the cost of the Python loop that drives it.

    greenlet_bench.py            the table benches/compare.sh reads
    greenlet_bench.py --kv       every figure as `key value` lines, for
                                 benches/peers (adds start+kill, the most
                                 greenlets alive at once, thread exits)
    greenlet_bench.py --most-alive CAP
                                 (the child --kv runs) suspended greenlets
                                 until CAP or a failure; prints the count
"""

import gc
import os
import platform
import subprocess
import sys
import threading
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


def start_kill(n=20_000):
    """Create a greenlet, switch into it (it switches back to main), throw
    GreenletExit into it (it ends), drop it: the peers' "start + kill"."""
    main = getcurrent()

    def body():
        main.switch()

    def run():
        make = greenlet.greenlet
        for _ in range(n):
            g = make(body)
            g.switch()
            g.throw()

    return best_ns_per_op(run, n)


def most_alive_child(cap):
    """Suspended greenlets until `cap` or a failure; prints `alive N` every
    thousand, then the count and why it stopped. Ends without tearing down."""
    main = getcurrent()

    def body():
        main.switch()

    alive = []
    reason = "the cap"
    try:
        while len(alive) < cap:
            g = greenlet.greenlet(body)
            g.switch()
            alive.append(g)
            if len(alive) % 1000 == 0:
                print(f"alive {len(alive)}", flush=True)
    except BaseException as err:  # MemoryError, RecursionError, ...
        reason = f"then: {type(err).__name__}: {err}"
    print(f"alive {len(alive)}", flush=True)
    print(f"how {reason}", flush=True)
    os._exit(0)


def most_alive(cap=300_000, limit=300):
    """Runs most_alive_child in a child interpreter (killed after `limit`
    seconds); returns (count, how it stopped)."""
    try:
        out = subprocess.run(
            [sys.executable, __file__, "--most-alive", str(cap)],
            capture_output=True, text=True, timeout=limit,
        )
        text, failure = out.stdout, (None if out.returncode == 0 else f"exit {out.returncode}")
    except subprocess.TimeoutExpired as err:
        text = err.stdout.decode() if isinstance(err.stdout, bytes) else (err.stdout or "")
        failure = f"killed after {limit} s"
    count, how = 0, None
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if key == "alive":
            count = int(value)
        elif key == "how":
            how = value
    return count, how or f"then the child died: {failure}"


def thread_exits(threads=1_000, per_thread=10):
    """Short-lived threads, one after another: each starts `per_thread`
    greenlets that suspend back to the thread's main greenlet, registers a
    weakref callback (a finalizer) on each, and ends with them suspended.
    Returns (ns per bare thread start+join, ns per such thread)."""
    import weakref

    finalized = []
    # The weakrefs outlive their greenlets, so that their callbacks run.
    refs = []

    def bare():
        pass

    def with_greenlets():
        main = getcurrent()

        def body():
            main.switch()

        kept = []
        for _ in range(per_thread):
            g = greenlet.greenlet(body)
            g.switch()
            kept.append(g)
            refs.append(weakref.ref(g, finalized.append))

    def per_thread_ns(target):
        best = None
        for _ in range(3):
            start = time.perf_counter_ns()
            for _ in range(threads):
                t = threading.Thread(target=target)
                t.start()
                t.join()
            elapsed = time.perf_counter_ns() - start
            best = elapsed if best is None else min(best, elapsed)
        return best / threads

    bare_ns = per_thread_ns(bare)
    loaded_ns = per_thread_ns(with_greenlets)
    gc.collect()
    return bare_ns, loaded_ns, len(finalized)


def key_values():
    """Every figure, one `key value` line each (benches/peers reads them)."""
    print(f"python {platform.python_version()}")
    print(f"greenlet {greenlet.__version__}")
    print(f"round_trip_ns {switch_round_trip():.1f}")
    print(f"switch_ns {ping_pong():.1f}")
    print(f"create_ns {create_run_finish():.1f}")
    print(f"kill_ns {kill_suspended():.1f}")
    print(f"start_kill_ns {start_kill():.1f}")
    print(f"rss_per_bytes {memory_per_suspended():.0f}")
    bare, loaded, finalized = thread_exits()
    print(f"thread_bare_ns {bare:.0f}")
    print(f"thread_10_greenlets_ns {loaded:.0f}")
    print(f"thread_10_greenlets_finalized {finalized}")
    count, how = most_alive()
    print(f"most_alive {count}")
    print(f"most_alive_how {how}")
    return 0


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
    if sys.argv[1:] == ["--kv"]:
        sys.exit(key_values())
    if len(sys.argv) == 3 and sys.argv[1] == "--most-alive":
        most_alive_child(int(sys.argv[2]))
    if sys.argv[1:]:
        sys.exit(__doc__.strip())
    sys.exit(main())
