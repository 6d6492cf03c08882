"""Tabulates one run of benches/compare.sh: criterion's output for the Rust
benches, the memory example's output and the Python benchmark's output, each
in a file named on the command line, as one Markdown table with the issue's
targets and a verdict for each.

Usage: compare.py CRITERION_OUTPUT MEMORY_OUTPUT PYTHON_OUTPUT
"""

import re
import sys

UNITS = {"ps": 1e-3, "ns": 1.0, "µs": 1e3, "us": 1e3, "ms": 1e6, "s": 1e9}


def criterion_estimates(text):
    """{benchmark name: point estimate in ns}. Criterion prints the name,
    then (on the same line or the next) `time: [low unit est unit high unit]`."""
    found = {}
    name = None
    for line in text.splitlines():
        match = re.search(r"time:\s+\[\S+ \S+ (\S+) (\S+) \S+ \S+\]", line)
        head = line.split("time:")[0].strip()
        if head:
            name = head
        if match and name:
            found[name] = float(match.group(1)) * UNITS[match.group(2)]
            name = None
    return found


def labelled_figures(text, pattern):
    """{label: figure} for each line matching `pattern`, whose first group is
    the label and second the figure: `RSS <n> bytes` rows of
    benches/drivers/memory.rs, `<operation>  <ns>` rows of
    benches/python/greenlet_bench.py."""
    found = {}
    for line in text.splitlines():
        match = re.match(pattern, line)
        if match:
            found[match.group(1).strip()] = float(match.group(2))
    return found


def need(table, key, source):
    if key not in table:
        sys.exit(f"compare.py: no '{key}' in the {source} output; was it renamed?")
    return table[key]


def ns(value):
    return f"{value / 1000:.2f} µs" if value >= 1000 else f"{value:.1f} ns"


def main(args):
    if len(args) != 3:
        sys.exit(__doc__.strip())
    criterion, memory, python = (open(path, encoding="utf-8").read() for path in args)
    c = criterion_estimates(criterion)
    m = labelled_figures(memory, r"(.+?)\s+RSS\s+(\d+) bytes")
    p = labelled_figures(python, r"(.+?)\s{2,}([\d.]+)")

    raw_trip = need(c, "switch/raw corosensei resume+suspend (round trip)", "criterion")
    trip = need(c, "switch/greenlet main<->greenlet g.switch (round trip)", "criterion")
    raw_ab = need(c, "switch/raw corosensei A->B via dispatcher (per switch)", "criterion")
    ab = need(c, "switch/greenlet A<->B ping-pong (per switch)", "criterion")
    raw_create = need(c, "lifecycle/raw corosensei create+run+finish+drop (pooled stack)", "criterion")
    create = need(c, "lifecycle/greenlet create+run+finish+drop", "criterion")
    raw_kill = need(c, "kill/raw corosensei message (resume to return)+drop", "criterion")
    kill = need(c, "kill/greenlet g.kill() of a suspended greenlet + drop", "criterion")
    raw_rss = need(m, "raw corosensei, 256 KiB pooled stack", "memory example")
    rss = need(m, "greenlet, 256 KiB stack", "memory example")
    py = [
        need(p, "switch main<->greenlet, round trip (g.switch from main)", "Python"),
        need(p, "switch greenlet<->greenlet (A<->B), per switch", "Python"),
        need(p, "create + run + finish + drop", "Python"),
        need(p, "kill a suspended greenlet (g.throw())", "Python"),
        need(p, "RSS per suspended greenlet (10,000 alive)", "Python"),
    ]

    def verdict(ok):
        return "met" if ok else "**not met**"

    rows = [
        ("switch main↔greenlet, round trip", ns(raw_trip), ns(trip), ns(py[0]),
         f"≤ 1.5× raw: {trip / raw_trip:.1f}×, {verdict(trip <= 1.5 * raw_trip)}"),
        ("switch A↔B, per switch", f"{ns(raw_trip)} round trip ({ns(raw_ab)} as a dispatcher loop)",
         ns(ab), ns(py[1]),
         f"≤ 2.5× raw round trip: {ab / raw_trip:.1f}×, {verdict(ab <= 2.5 * raw_trip)}"),
        ("create + run + finish + drop", ns(raw_create), ns(create), ns(py[2]),
         f"≤ 100 ns: {verdict(create <= 100)}"),
        ("kill a suspended greenlet (+ drop)", f"{ns(raw_kill)} as a message", ns(kill), ns(py[3]),
         f"≤ 200 ns: {verdict(kill <= 200)}"),
        ("RSS per suspended greenlet, 10,000 alive", f"{raw_rss / 1024:.1f} KiB",
         f"{rss / 1024:.1f} KiB", f"{py[4] / 1024:.1f} KiB",
         f"≤ 8 KiB: {verdict(rss <= 8 * 1024)}"),
    ]
    print(python.splitlines()[0] if python else "")
    print("| operation | raw corosensei (floor) | greenlet (this crate) | CPython greenlet | target |")
    print("|---|---|---|---|---|")
    for row in rows:
        print("| " + " | ".join(row) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
