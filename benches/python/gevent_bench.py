"""gevent 26.9.0 timings for the figures of the hub's table
(benches/peers, `peers hub`): spawn + join (one at a time and in batches),
two greenlets yielding with sleep(0), Queue ping-pong (capacity 1 and
unbounded), and 100,000 sleepers with their memory.

Run through `run.sh --gevent` (which installs gevent==26.9.0 in a venv of
its own). Each figure includes the cost of the Python loop that drives it.

    gevent_bench.py                      every figure once, as a small table
    gevent_bench.py --sample FIGURE COUNT [--warm WARM]
                                         (what benches/peers runs, one child
                                         per sample) WARM untimed operations,
                                         then COUNT timed; prints
                                         `elapsed_ns N` (and `rss_per BYTES`
                                         for the sleepers)
"""

import argparse
import os
import sys
import time

import gevent
from gevent.queue import Queue

SLEEP_S = 0.010
PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")


def resident_bytes():
    """This process's resident set (/proc/self/statm)."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * PAGE_SIZE


def peak_resident_bytes():
    """This process's peak resident set (VmHWM in /proc/self/status)."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmHWM line in /proc/self/status")


def nothing():
    """The empty task."""


def spawn_join(n):
    """n spawns of an empty greenlet, each joined."""
    start = time.perf_counter_ns()
    for _ in range(n):
        gevent.spawn(nothing).join()
    return time.perf_counter_ns() - start, None


BATCH = 10_000


def spawn_join_batch(n):
    """n spawns of an empty greenlet, BATCH spawned before any is joined."""
    start = time.perf_counter_ns()
    left = n
    while left > 0:
        batch = min(left, BATCH)
        gevent.joinall([gevent.spawn(nothing) for _ in range(batch)], raise_error=True)
        left -= batch
    return time.perf_counter_ns() - start, None


def yielder(k):
    for _ in range(k):
        gevent.sleep(0)


def yields(n):
    """n yields in all: this greenlet and another, sleep(0) each."""
    start = time.perf_counter_ns()
    other = gevent.spawn(yielder, n // 2)
    yielder(n // 2)
    other.join()
    return time.perf_counter_ns() - start, None


def echo(inbox, outbox):
    for value in inbox:
        outbox.put(value)


def ping_pong(n, maxsize=1):
    """n round trips to an echo greenlet over two Queues of maxsize
    (None: unbounded)."""
    to_echo, to_main = Queue(maxsize), Queue(maxsize)
    other = gevent.spawn(echo, to_echo, to_main)
    start = time.perf_counter_ns()
    for i in range(n):
        to_echo.put(i)
        to_main.get()
    elapsed = time.perf_counter_ns() - start
    to_echo.put(StopIteration)
    other.join()
    return elapsed, None


def sleepers(n):
    """n greenlets each sleeping 10 ms, all joined; and the memory per
    sleeper (peak resident growth over n)."""
    before = resident_bytes()
    start = time.perf_counter_ns()
    greenlets = [gevent.spawn(gevent.sleep, SLEEP_S) for _ in range(n)]
    gevent.joinall(greenlets, raise_error=True)
    elapsed = time.perf_counter_ns() - start
    return elapsed, (peak_resident_bytes() - before) / n


FIGURES = {
    "spawn-join": (spawn_join, 20_000, "spawn + join an empty greenlet"),
    "yield": (yields, 100_000, "two greenlets yielding (sleep(0)), per yield"),
    "spawn-join-batch": (spawn_join_batch, 20_000, "spawn 10,000 empty greenlets, then join them"),
    "ping-pong": (ping_pong, 50_000, "Queue(1) ping-pong, per round trip"),
    "ping-pong-unbounded": (
        lambda n: ping_pong(n, None),
        50_000,
        "Queue() ping-pong, per round trip",
    ),
    "sleepers": (sleepers, 100_000, "100,000 sleepers of 10 ms, all joined"),
}


def table():
    print(f"gevent {gevent.__version__}, CPython {sys.version.split()[0]}")
    for name, (run, count, title) in FIGURES.items():
        run(count // 10)
        elapsed, rss = run(count)
        line = f"{title}: {elapsed / count:,.0f} ns per op, {elapsed / 1e6:,.0f} ms in all"
        if rss is not None:
            line += f", {rss / 1024:.1f} KiB per sleeper"
        print(line)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sample", nargs=2, metavar=("FIGURE", "COUNT"))
    parser.add_argument("--warm", type=int, default=0)
    args = parser.parse_args()
    if args.sample is None:
        table()
        return
    name, count = args.sample
    if name not in FIGURES:
        parser.error(f"unknown figure {name!r}; one of {', '.join(FIGURES)}")
    try:
        count = int(count)
    except ValueError:
        parser.error(f"COUNT must be a whole number, not {count!r}")
    if count < 1 or args.warm < 0:
        parser.error("COUNT must be at least 1 and --warm at least 0")
    run = FIGURES[name][0]
    if args.warm:
        run(args.warm)
    elapsed, rss = run(count)
    print(f"elapsed_ns {elapsed}")
    if rss is not None:
        print(f"rss_per {rss}")


if __name__ == "__main__":
    main()
