"""The differential tester's driver: generates random greenlet programs
(seeded), runs them on Python's greenlet (interp.py, one venv per CPython)
and on the crate (tests/differential/difftest_interp.rs), normalises exactly the
differences docs/greenlets.md documents (each by name, counted), compares, sorts
every disagreement into a class, shrinks one program per class and prints a
summary.

    difftest.py run --programs 5000 --seed 1 --python PY311 --python PY312 \
        --rust target/release/examples/difftest_interp [--gen kill-shapes] \
        [--shrink] [--out DIR]
    difftest.py one PROGRAM.json --python PY --rust BIN   (both logs, diffed)

Owns generation, normalisation, comparison, classification and shrinking;
uses only the standard library (run it with any Python 3.8+).
"""

import argparse
import collections
import json
import os
import random
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
INTERP_PY = os.path.join(HERE, "interp.py")

# ---------------------------------------------------------------------------
# Generation


class Gen:
    """A seeded random program: 2-4 main-thread greenlets with short bodies,
    a main op list, sometimes a tracer, sometimes a helper thread."""

    def __init__(self, rng):
        self.rng = rng
        self.value = 0

    def val(self):
        self.value += 1
        return self.value

    def program(self):
        r = self.rng
        names = ["a", "b", "c", "d"][: r.randint(2, 4)]
        greenlets = {}
        for n in names:
            greenlets[n] = {"body": self.ops(names, depth=0, count=r.randint(0, 4), in_body=n)}
        main = []
        if r.random() < 0.3:
            main.append({"op": "settrace", "fail_at": r.choice([None, None, 1, 2, 3, 4, 5, 7, 9])})
        created = []
        for n in names:
            op = {"op": "create", "g": n}
            if created and r.random() < 0.4:
                op["parent"] = r.choice(created)
            main.append(op)
            created.append(n)
            if r.random() < 0.5:
                main.append({"op": "switch", "g": n, "value": self.val()})
        main += self.ops(names, depth=0, count=r.randint(2, 8), in_body=None)
        if r.random() < 0.12:
            thread_names = ["e", "f"]
            for n in thread_names:
                greenlets[n] = {"body": self.ops(thread_names + ["t1"], 0, r.randint(0, 3), n)}
            tops = [{"op": "create", "g": "e"}, {"op": "create", "g": "f"}]
            tops += self.ops(thread_names + names[:1] + ["t1"], 0, r.randint(1, 5), None)
            main.insert(r.randint(len(names), len(main)), {"op": "thread", "name": "t1", "ops": tops})
        return {"greenlets": greenlets, "main": main}

    def ops(self, names, depth, count, in_body):
        return [self.op(names, depth, in_body) for _ in range(count)]

    def op(self, names, depth, in_body):
        r = self.rng
        targets = names + ["main"]
        g = r.choice(targets)
        choices = [
            (10, lambda: {"op": "switch", "g": g, "value": self.val()}),
            (6, lambda: {"op": "switch_parent", "value": self.val()}),
            (5, lambda: self.throw(g)),
            (4, lambda: {"op": "kill", "g": r.choice(names)}),
            (4, lambda: {"op": "drop", "g": r.choice(names)}),
            (2, lambda: {"op": "hold", "g": r.choice(names)}),
            (1, lambda: {"op": "release"}),
            (2, lambda: {"op": "set_parent", "g": r.choice(names), "parent": r.choice(targets)}),
            (2, lambda: {"op": "parent", "g": r.choice(names)}),
            (2, lambda: {"op": "status", "g": r.choice(names)}),
            (1, lambda: {"op": "settrace", "fail_at": r.choice([None, 1, 2, 3, 5])}),
            (1, lambda: {"op": "settrace_off"}),
        ]
        later = [n for n in names if in_body is not None and n > in_body and n not in ("main", "t1")]
        if later:
            # Only names after the body's own: no chain of creations is endless.
            choices.append((1, lambda: {"op": "create", "g": r.choice(later)}))
        if in_body is not None:
            choices += [
                (2, lambda: {"op": "return", "value": self.val()}),
                (2, lambda: {"op": "raise_user", "msg": "u%d" % self.val()}),
                (2, lambda: self.raise_exit()),
            ]
        if depth < 2:
            choices += [
                (6, lambda: self.try_(names, depth, in_body)),
                (2, lambda: {
                    "op": "loop",
                    "n": r.randint(2, 3),
                    "body": self.ops(names, depth + 1, r.randint(1, 2), in_body),
                }),
            ]
        total = sum(w for w, _ in choices)
        pick = r.uniform(0, total)
        for w, make in choices:
            pick -= w
            if pick <= 0:
                return make()
        return choices[-1][1]()

    def throw(self, g):
        r = self.rng
        if r.random() < 0.6:
            op = {"op": "throw", "g": g, "err": "exit"}
            if r.random() < 0.2:
                op["value"] = self.val()
            return op
        return {"op": "throw", "g": g, "err": "user", "msg": "t%d" % self.val()}

    def raise_exit(self):
        if self.rng.random() < 0.4:
            return {"op": "raise_exit", "value": self.val()}
        return {"op": "raise_exit"}

    def try_(self, names, depth, in_body):
        r = self.rng
        handler_kind = r.choice(["switch", "switch_parent", "return", "raise", "raise_user", "none"])
        handler = []
        if handler_kind == "switch":
            handler.append({"op": "switch", "g": r.choice(names + ["main"]), "value": self.val()})
        elif handler_kind == "switch_parent":
            handler.append({"op": "switch_parent", "value": self.val()})
        elif handler_kind == "return" and in_body is not None:
            handler.append({"op": "return", "value": self.val()})
        elif handler_kind == "raise":
            handler.append({"op": "raise"})
        elif handler_kind == "raise_user":
            handler.append({"op": "raise_user", "msg": "h%d" % self.val()})
        if r.random() < 0.3:
            handler.append(self.op(names, depth + 1, in_body))
        return {
            "op": "try",
            "catch": r.choice(["exit", "any"]),
            "body": self.ops(names, depth + 1, r.randint(1, 3), in_body),
            "handler": handler,
        }


class KillShapesGen(Gen):
    """`Gen` with one of four shapes of kills on drop added to every
    program, which plain programs rarely make:

    - reachable again: a victim of a kill on drop that creates a child in
      its exit handler (the child's parent is the victim) and switches
      away, the child dropped later;
    - mutual holds: two greenlets holding each other's handles, dropped by
      main and left to the thread's exit (or killed by a drop);
    - mailed kill: a suspended greenlet whose last handle a helper thread
      drops, so that its kill is queued to the main thread, followed by
      switches, with tracing on or off (the kill runs in the greenlet that
      switches, before the switch);
    - killing victim: a victim of a kill on drop that kills, in its exit
      handler, a greenlet that survives kills (it catches the exit and
      switches to its parent), and gets `killignored` from that kill; or
      that throws an exit carrying a value into main, its dropper."""

    SHAPES = ("reachable_again", "mutual_holds", "mailed_kill", "killing_victim")
    # Programs made of each shape, in this process (for the summary).
    made = collections.Counter()

    def program(self):
        r = self.rng
        prog = super().program()
        names = sorted(n for n in prog["greenlets"] if n in "abcd")
        x, y = sorted(r.sample(names, 2))
        main = prog["main"]
        shape = r.choice(self.SHAPES)
        self.made[shape] += 1
        tail = getattr(self, shape)(prog, names, x, y)
        # After y's creation (x's comes first).
        at = next(i for i, op in enumerate(main) if op.get("op") == "create" and op.get("g") == y) + 1
        main[at:at] = tail
        return prog

    def reachable_again(self, prog, names, x, y):
        # x catches its kill, makes y (whose parent is x) and switches
        # away; main drops x, looks at y, drops y later.
        r = self.rng
        handler = [{"op": "create", "g": y}, {"op": "switch", "g": "main", "value": self.val()}]
        if r.random() < 0.5:
            handler.append(self.op(names, 1, x))
        prog["greenlets"][x]["body"][:0] = [{
            "op": "try", "catch": "exit",
            "body": [{"op": "switch", "g": "main", "value": self.val()}],
            "handler": handler,
        }]
        tail = [{"op": "switch", "g": x, "value": self.val()}, {"op": "drop", "g": x},
                {"op": "status", "g": y}]
        tail += self.ops(names, 1, r.randint(0, 2), None)
        tail.append({"op": "drop", "g": y})
        return tail

    def mutual_holds(self, prog, names, x, y):
        # x and y hold each other; main drops both (or one), and the
        # thread's exit does the rest.
        r = self.rng
        prog["greenlets"][x]["body"][:0] = [{"op": "hold", "g": y},
                                            {"op": "switch", "g": "main", "value": self.val()}]
        prog["greenlets"][y]["body"][:0] = [{"op": "hold", "g": x},
                                            {"op": "switch", "g": "main", "value": self.val()}]
        tail = [{"op": "switch", "g": x, "value": self.val()},
                {"op": "switch", "g": y, "value": self.val()}]
        tail += self.ops(names, 1, r.randint(0, 2), None)
        tail += [{"op": "drop", "g": g} for g in r.sample([x, y], r.randint(1, 2))]
        return tail

    @staticmethod
    def no_early_switches(prog, names):
        """Removes the plain generator's switches into `names` right after
        their creation, so that the shape's prefix runs first."""
        main = prog["main"]
        main[:] = [op for j, op in enumerate(main)
                   if not (op.get("op") == "switch" and op.get("g") in names and j > 0
                           and main[j - 1] == {"op": "create", "g": op["g"]})]

    def mailed_kill(self, prog, names, v, w):
        # The victim (x or y) is suspended in a try; a helper thread drops
        # its last handle (the kill is queued to main); main then switches
        # to the other greenlet, so the queued kill runs in main, before
        # the switch. Its handler shows who killed it: its parent then.
        r = self.rng
        x, y = (v, w) if r.random() < 0.5 else (w, v)
        handler = r.choice([[],
                            [{"op": "switch_parent", "value": self.val()}],
                            [{"op": "parent", "g": x}],
                            [{"op": "raise_user", "msg": "m%d" % self.val()}],
                            [{"op": "switch", "g": y, "value": self.val()}]])
        prog["greenlets"][x]["body"][:0] = [{
            "op": "try", "catch": "exit",
            "body": [{"op": "switch", "g": "main", "value": self.val()}],
            "handler": handler,
        }]
        y_suspended = r.random() < 0.5
        if y_suspended:
            # y suspended too, so the switch resumes it (else starts it).
            prog["greenlets"][y]["body"][:0] = [{"op": "switch", "g": "main", "value": self.val()}]
        self.no_early_switches(prog, (x, y))
        tail = []
        if r.random() < 0.5:
            tail.append({"op": "settrace", "fail_at": None})
        tail.append({"op": "switch", "g": x, "value": self.val()})
        if y_suspended:
            tail.append({"op": "switch", "g": y, "value": self.val()})
        tail.append({"op": "thread", "name": "t2", "ops": [{"op": "drop", "g": x}]})
        tail.append({"op": "switch", "g": y, "value": self.val()})
        tail += self.ops(names, 1, r.randint(0, 2), None)
        return tail

    def killing_victim(self, prog, names, v, w):
        # y survives kills (catches the exit, switches to its parent: the
        # killer during a kill); x, killed on drop, kills y in its handler
        # and gets killignored, which it lets end it, or catches.
        r = self.rng
        x, y = (v, w) if r.random() < 0.5 else (w, v)
        stubborn = {"op": "try", "catch": "exit",
                    "body": [{"op": "switch_parent", "value": self.val()}],
                    "handler": []}
        prog["greenlets"][y]["body"][:0] = [{"op": "loop", "n": r.randint(2, 3), "body": [stubborn]}]
        handler = [{"op": "kill", "g": y}]
        if r.random() < 0.25:
            # Or x throws an exit carrying a value into its dropper, main.
            handler = [{"op": "throw", "g": "main", "err": "exit", "value": self.val()}]
        if r.random() < 0.3:
            handler = [{"op": "try", "catch": "any", "body": handler,
                        "handler": [self.op(names, 1, x)]}]
        prog["greenlets"][x]["body"][:0] = [{
            "op": "try", "catch": "exit",
            "body": [{"op": "switch", "g": "main", "value": self.val()}],
            "handler": handler,
        }]
        self.no_early_switches(prog, (x, y))
        tail = []
        if r.random() < 0.3:
            tail.append({"op": "settrace", "fail_at": None})
        tail += [{"op": "switch", "g": y, "value": self.val()},
                 {"op": "switch", "g": x, "value": self.val()},
                 {"op": "drop", "g": x}]
        tail += self.ops(names, 1, r.randint(0, 2), None)
        return tail


GENERATORS = {"plain": Gen, "kill-shapes": KillShapesGen}


# ---------------------------------------------------------------------------
# Running


def run_batch(command, programs):
    """Runs {id: program} through one interpreter's batch mode."""
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as f:
        for pid, prog in programs.items():
            f.write(json.dumps({"id": pid, "program": prog}) + "\n")
        path = f.name
    try:
        out = subprocess.run(command + [path], stdout=subprocess.PIPE, check=True, text=True).stdout
    finally:
        os.unlink(path)
    results = {}
    for line in out.splitlines():
        item = json.loads(line)
        results[item["id"]] = (item["status"], item["log"])
    return results


def py_command(python):
    return [python, INTERP_PY]


def rust_command(binary):
    return [binary, "--batch"]


# ---------------------------------------------------------------------------
# Normalisation: exactly the documented differences, each by name.

PY_BUGS = {
    # greenlet passes the GreenletExit object where an unstarted parent's
    # argument tuple belongs (a crash when the exception has a __dict__).
    # Without a __dict__ it reads as an empty tuple: run() gets no argument.
    "py_bug_exit_as_args": lambda st, log: st.startswith("crash")
    or any(l.endswith("] py-bug exit-as-args") for l in log),
    # a switch that first runs a queued cross-thread kill fails with
    # SystemError "... returned NULL without setting an exception" (or
    # "error return without exception set").
    "py_bug_null_without_exception": lambda st, log: any(
        "returned NULL without" in l or "without exception set" in l or "without an exception set" in l
        for l in log),
    # a queued cross-thread kill run at the start of a switch starts the
    # switch's target itself; the outer switch then fails with greenlet's
    # internal "cannot switch with no pending arguments or exception"
    # (3.12; on 3.11 the same programs hit py_bug_exit_as_args).
    "py_bug_switch_args_lost": lambda st, log: any("no pending arguments or exception" in l for l in log),
    # the same kind of program can leave the thread with no current Python
    # frame (sys._getframe() fails; interp.py marks it).
    "py_bug_frames_lost": lambda st, log: "py-bug frames-lost" in log,
    # or make the switch fire a throw event into its own target, which
    # nothing threw (3.12; 3.11 hits py_bug_exit_as_args there).
    "py_bug_switch_fires_throw": lambda st, log: switch_fires_throw(log),
}

def switch_fires_throw(log):
    """Whether a `switch g` op of greenlet X gets a `trace throw X->g` event
    that no greenlet's code follows before the op's result (only more trace
    events): greenlet fired a throw for the switch itself."""
    for i, line in enumerate(log):
        m = re.match(r"\[(\w+)\] switch (\w+) -?\d+$", line)
        if not m:
            continue
        who, g = m.groups()
        for j in range(i + 1, len(log)):
            if log[j].startswith("[%s] switch %s =>" % (who, g)):
                break
            if log[j] == "trace throw %s->%s" % (who, g):
                rest = [l for l in log[j + 1:] if not l.startswith("trace ")]
                if rest and rest[0].startswith("[%s] switch %s =>" % (who, g)):
                    return True
    return False


EXIT_OBJECT_WITH_ARGS = re.compile(r"exitobj\(([^()]+)\)")
DID_NOT_KILL = re.compile(r"GreenletExit did not kill '?([A-Za-z0-9]+)'?")
KILL_ERROR = re.compile(r"'([A-Za-z0-9]+)' \(id \d+\) ended with an error while being killed: (.*)")


def canon_report(line):
    """One spelling for the crate's and greenlet's reports."""
    text = line
    if text.startswith("stderr "):
        text = text[len("stderr "):]
    m = DID_NOT_KILL.search(text)
    if m:
        return "report did-not-kill %s" % m.group(1)
    m = KILL_ERROR.search(text)
    if m:
        return "report kill-error %s %s" % (m.group(1), m.group(2))
    if text.startswith("report unraisable "):
        return "report kill-error " + text[len("report unraisable "):]
    return line


def finalized_in_threads(log):
    """The greenlets a log shows finalized while a helper thread ran."""
    names = collections.Counter()
    in_thread = False
    for line in log:
        m = re.match(r"\[main\] (thread|joined) (\w+)$", line)
        if m:
            in_thread = m.group(1) == "thread"
        elif in_thread and re.match(r"fin \w+$", line):
            names[line[4:]] += 1
    return names


def normalise(log, side, counts, fin_elsewhere=None):
    """Applies the documented differences to one log (side: "py" or "rs");
    returns the new log, adding to counts[name] each time one applied.
    `fin_elsewhere`: for the crate's log, the greenlets Python finalized
    while a helper thread ran (see `unstarted_dropped_elsewhere`)."""
    fin_elsewhere = collections.Counter(fin_elsewhere or {})
    out = []
    skipping_thread = None
    in_thread = None
    for line in log:
        m = re.match(r"\[main\] (thread|joined) (\w+)$", line)
        if m:
            in_thread = m.group(2) if m.group(1) == "thread" else None
        # unstarted_dropped_elsewhere (docs/greenlets.md: "A greenlet belongs to the
        # thread that created it"): the last handle of a main-thread
        # greenlet dropped by a helper thread queues its kill (or
        # finalization) to the main thread even when it never started, so
        # its closure is dropped there; greenlet frees an unstarted one at
        # once on the helper thread. Finalizations while a helper thread
        # runs are not compared.
        if in_thread is not None and re.match(r"fin \w+$", line):
            if side == "py":
                counts["unstarted_dropped_elsewhere"] += 1
            else:
                fin_elsewhere[line[4:]] -= 1
            continue
        # The same, once the helper thread is joined: the crate finalizes
        # such a greenlet at the main thread's next greenlet operation.
        if side == "rs" and re.match(r"fin \w+$", line) and fin_elsewhere[line[4:]] > 0:
            fin_elsewhere[line[4:]] -= 1
            continue
        if line.startswith("report") or line.startswith("stderr"):
            line = canon_report(line)
        # parent_thread_affinity, for kill (docs/greenlets.md: "A greenlet belongs to
        # the thread that created it"): only its thread kills it; interp.py's
        # stand-in refuses as a throw from another thread is refused, where
        # greenlet would let an unstarted greenlet take the killer's thread.
        if side == "py" and "killthread" in line:
            line = line.replace("killthread", "wrongthread")
            counts["parent_thread_affinity"] += 1
        # exit_value_unwrapped (docs/greenlets.md: "A greenlet that ends with
        # GreenletExit carrying a value hands its parent that value"):
        # greenlet hands the exception object, GreenletExit(v), whose args
        # hold the value.
        if side == "py" and EXIT_OBJECT_WITH_ARGS.search(line):
            line = EXIT_OBJECT_WITH_ARGS.sub(r"\1", line)
            counts["exit_value_unwrapped"] += 1
        # thread_exit_unwind (docs/greenlets.md: "Suspended greenlets of an exiting thread
        # are unwound in that thread"): what the crate does while a thread
        # exits -- its greenlets' handlers, finalizers, reports -- has no
        # Python counterpart (greenlet frees them without running anything).
        if skipping_thread is not None:
            if line == "[main] joined %s" % skipping_thread or line.endswith("] joined %s" % skipping_thread):
                skipping_thread = None
            else:
                counts["thread_exit_unwind"] += 1
                continue
        if re.match(r"\[[a-z0-9]+\] thread done", line):
            out.append(line)
            skipping_thread = line[1:line.index("]")]
            continue
        if line == "[main] teardown":
            out.append(line)
            out += false_teardown_reports(log, log[log.index(line) + 1:], counts)
            break
        # unstarted_throw_no_trace (docs/greenlets.md: "throwing into an unstarted
        # greenlet kills it without switching to it (no trace event names
        # it)"): interp.py marks Python's events of such a throw.
        if line.endswith(" [unstarted-throw]"):
            counts["unstarted_throw_no_trace"] += 1
            continue
        # joined_thread_race (README: "Another thread's greenlets are of an
        # exited thread as soon as it exits"): greenlet treats a joined thread's
        # greenlets as alive until its deferred cleanup ran, so which of its
        # two "other thread" errors a switch gets is a race.
        if "threadexited" in line or "wrongthread" in line:
            line = line.replace("threadexited", "otherthread").replace("wrongthread", "otherthread")
            if side == "py":
                counts["joined_thread_race"] += 1
        out.append(line)
    return out


def false_teardown_reports(log, tail, counts):
    """What the crate does after the program's main thread finished is the
    documented thread-exit unwind (counted as thread_exit_unwind), except a
    report that a greenlet "caught the exit and switched away" when it
    never caught anything (in that unwind, or in a kill still pending when
    the program ended, whose report the unwind brings): kept as a line of
    its own."""
    out = []
    for line in tail:
        counts["thread_exit_unwind"] += 1
        m = re.match(r"report did-not-kill (\w+)$", canon_report(line))
        if m and not any(l.startswith("[%s] caught" % m.group(1)) for l in log):
            out.append("teardown false report: did-not-kill %s" % m.group(1))
    return out


def documented_cut(py, rs, counts):
    """Where the logs part at a documented difference whose consequences run
    on, both are compared only up to it (counted by name)."""
    for i, (a, b) in enumerate(zip(py, rs)):
        if a == b:
            continue
        # parent_thread_affinity (docs/greenlets.md: "A greenlet belongs to the thread
        # that created it, and so must its parent"): greenlet lets an
        # unstarted greenlet take a parent on another thread.
        # Re-parenting from another thread is refused before anything else
        # ("only the thread that created it may ... re-parent it").
        refused = b.endswith("=> err parentthread") or b.endswith("=> err otherthread")
        if refused and " set_parent " in a and (a.endswith("=> ok") or a.endswith("=> err cycle") or a.endswith("=> err parentthread")):
            counts["parent_thread_affinity"] += 1
            return py[:i], rs[:i]
        return py, rs
    return py, rs


def first_diff(py, rs):
    for i in range(max(len(py), len(rs))):
        a = py[i] if i < len(py) else "<end>"
        b = rs[i] if i < len(rs) else "<end>"
        if a != b:
            return i, a, b
    return None


def compare(program, py_result, rs_result, counts):
    """Returns None (agree), ("excluded", name) or ("disagree", class, detail)."""
    py_status, py_log = py_result
    rs_status, rs_log = rs_result
    for name, test in PY_BUGS.items():
        if test(py_status, py_log):
            return ("excluded", name)
    if any("other(kill-of-ancestor)" in l for l in py_log):
        return ("excluded", "no_stand_in_kill_of_an_ancestor")
    if any("other(kill-parent-loop)" in l for l in py_log):
        return ("excluded", "no_stand_in_parent_loop")
    if py_status != "ok" or rs_status != "ok":
        if py_status == rs_status:
            return None
        return ("disagree", "status %s vs %s" % (py_status, rs_status), None)
    local = collections.Counter()
    py = normalise(py_log, "py", local)
    rs = normalise(rs_log, "rs", local, finalized_in_threads(py_log))
    py, rs = documented_cut(py, rs, local)
    diff = first_diff(py, rs)
    counts.update(local.keys())
    if diff is None:
        return None
    i, a, b = diff
    return ("disagree", classify(program, py, rs, i), (i, a, b))


# ---------------------------------------------------------------------------
# Classification: the known root causes, by the op the logs part in.

def open_op(log, i, start_re, end_fmt):
    """The last line before index i matching start_re whose end line
    (end_fmt % name) has not come yet: the op the logs part inside."""
    for j in range(i - 1, -1, -1):
        m = re.match(start_re, log[j])
        if m and not any(l.startswith(end_fmt % m.groups()) for l in log[j + 1:i]):
            return log[j]
    return None


def classify(program, py, rs, i):
    a = py[i] if i < len(py) else "<end>"
    b = rs[i] if i < len(rs) else "<end>"
    before = py[:i]
    if b.startswith("teardown false report"):
        return "8 teardown reports a greenlet that only passed the exit up"
    if "report kill-error" in a + b and ("killignored" in a or "killignored" in b):
        return "10 a victim ended by KillIgnored from its own kill goes unreported"
    if re.match(r"report kill-error \w+ exit\(", a) or re.match(r"report kill-error \w+ exit\(", b):
        return "11 a kill report leaves out the value GreenletExit carries"
    if any(re.match(r"\[t\d+\] drop [a-d]$", l) for l in before) and any(
            re.match(r"\[main\] joined \w+$", l) for l in before):
        return "9 a kill mailed by another thread runs after the switch, in its target"
    if a.startswith("report kill-error") or b.startswith("report kill-error"):
        return "4 error raised into the dropper during a kill on drop"
    if "did-not-kill" in a or "did-not-kill" in b:
        return "5 which greenlet a kill on drop reports leaked"
    if open_op(py, i, r"(\[\w+\] throw \w+) exit(?:\(\d+\))? \(unstarted\)$", "%s =>"):
        return "1 GreenletExit thrown into an unstarted greenlet"
    if open_op(py, i, r"(\[\w+\] throw \w+) exit(?:\(\d+\))? \(dead\)$", "%s =>"):
        return "2 GreenletExit thrown into a dead greenlet"
    if (a.startswith("trace") or b.startswith("trace")) and open_op(
            py, i, r"(\[\w+\] throw \w+) .*\((?:unstarted|active)\)$", "%s =>"):
        return "7 trace event of a throw that lands in the current greenlet"
    m = re.match(r"\[(\w+)\] switch_parent (\w+) ", a)
    if m and b.startswith("[%s] switch_parent " % m.group(1)) and before and before[-1] == "[%s] caught exit" % m.group(1):
        return "3 the victim's parent during a kill"
    if "exitobj(" in a and "exitobj()" not in a:
        return "6 GreenletExit carrying a value"
    if open_op(py, i, r"\[(\w+)\] drop (\w+)$", "[%s] dropped %s") or open_op(py, i, r"(\[\w+\] kill \w+) \(", "%s =>"):
        return "3 the victim's parent during a kill"
    del before
    return "new: first differing lines %r / %r" % (shape(a), shape(b))


def shape(line):
    return re.sub(r"\d+", "N", line)


# ---------------------------------------------------------------------------
# Shrinking: delta debugging over the program tree.


def candidates(program):
    """Programs one step simpler than `program`, simplest steps first."""
    def lists(node, path):
        if isinstance(node, dict):
            for k, v in node.items():
                yield from lists(v, path + [k])
        elif isinstance(node, list):
            yield path, node
            for j, v in enumerate(node):
                yield from lists(v, path + [j])

    def replace(prog, path, new):
        prog = json.loads(json.dumps(prog))
        node = prog
        for k in path[:-1]:
            node = node[k]
        node[path[-1]] = new
        return prog

    for path, ops in list(lists(program, [])):
        if not ops or not isinstance(ops[0], dict) or "op" not in ops[0]:
            continue
        # drop chunks, then single ops
        n = len(ops)
        size = n // 2
        while size >= 1:
            for start in range(0, n, size):
                yield replace(program, path, ops[:start] + ops[start + size:])
            size //= 2
        for j, op in enumerate(ops):
            if op["op"] == "try":
                yield replace(program, path, ops[:j] + op["body"] + ops[j + 1:])
                yield replace(program, path, ops[:j] + op["handler"] + ops[j + 1:])
            if op["op"] == "loop":
                yield replace(program, path, ops[:j] + op["body"] + ops[j + 1:])
            if op["op"] == "thread":
                yield replace(program, path, ops[:j] + ops[j + 1:])
            if op.get("fail_at") is not None:
                yield replace(program, path + [j], dict(op, fail_at=None))
            if op["op"] == "try" and op["catch"] == "any":
                yield replace(program, path + [j], dict(op, catch="exit"))
    text = json.dumps(program)
    for name in list(program["greenlets"]):
        if '"op": "create", "g": "%s"' % name not in text:
            prog = json.loads(json.dumps(program))
            del prog["greenlets"][name]
            yield prog


def renumber(program):
    """Values 1, 2, 3... in order of appearance (readability)."""
    counter = [0]

    def walk(node):
        if isinstance(node, dict):
            out = {}
            for k, v in node.items():
                if k == "value" and isinstance(v, int):
                    counter[0] += 1
                    out[k] = counter[0] * 10
                else:
                    out[k] = walk(v)
            return out
        if isinstance(node, list):
            return [walk(v) for v in node]
        return node

    return walk(program)


def shrink(program, cls, py_cmd, rs_cmd, budget=250):
    """The smallest program found that still disagrees in class `cls`."""
    def still(prog):
        res_py = run_batch(py_cmd, {0: prog})[0]
        res_rs = run_batch(rs_cmd, {0: prog})[0]
        verdict = compare(prog, res_py, res_rs, collections.Counter())
        return verdict is not None and verdict[0] == "disagree" and verdict[1] == cls

    best = program
    tries = 0
    improved = True
    while improved and tries < budget:
        improved = False
        for cand in candidates(best):
            tries += 1
            if tries >= budget:
                break
            if len(json.dumps(cand)) < len(json.dumps(best)) and still(cand):
                best = cand
                improved = True
                break
            if cand != best and len(json.dumps(cand)) >= len(json.dumps(best)) and still(cand):
                best = cand
                improved = True
                break
    nicer = renumber(best)
    return nicer if still(nicer) else best


# ---------------------------------------------------------------------------
# Readable Python for a program (for the findings).


def as_python(program):
    out = ["from greenlet import greenlet, getcurrent, GreenletExit, settrace",
           "# Greenlet names are module globals (the interpreters' handle table);",
           "# kill(), hook_failing_at() and UserError are in tests/differential/interp.py.", ""]
    for name, spec in program["greenlets"].items():
        out.append("def run_%s(arg):" % name)
        out += ["    " + l for l in py_ops(spec["body"]) or ["pass"]]
        out.append("")
    out.append("main = getcurrent()")
    out += py_ops(program["main"])
    return "\n".join(out)


def py_ops(ops, indent=""):
    lines = []
    for op in ops:
        k = op["op"]
        g = op.get("g")
        if k == "create":
            par = ", parent=%s" % op["parent"] if op.get("parent") else ""
            lines.append("%s = greenlet(run_%s%s)" % (g, g, par))
        elif k == "switch":
            lines.append("%s.switch(%s)" % (g, op["value"]))
        elif k == "switch_parent":
            lines.append("getcurrent().parent.switch(%s)" % op["value"])
        elif k == "throw":
            if op["err"] == "exit":
                lines.append("%s.throw(GreenletExit(%s))" % (g, op.get("value", "")))
            else:
                lines.append("%s.throw(UserError(%r))" % (g, op["msg"]))
        elif k == "kill":
            lines.append("kill(%s)  # GC-style kill: parent = getcurrent() for the throw" % g)
        elif k == "drop":
            lines.append("del globals()['%s']  # the table's reference" % g)
        elif k == "hold":
            lines.append("held.append(%s)" % g)
        elif k == "release":
            lines.append("held.clear()")
        elif k == "set_parent":
            lines.append("%s.parent = %s" % (g, op["parent"]))
        elif k == "parent":
            lines.append("print(%s.parent)" % g)
        elif k == "status":
            lines.append("print(%s.dead, bool(%s))" % (g, g))
        elif k == "try":
            lines.append("try:")
            lines += ["    " + l for l in py_ops(op["body"]) or ["pass"]]
            lines.append("except %s as e:" % ("GreenletExit" if op["catch"] == "exit" else "BaseException"))
            lines += ["    " + l for l in py_ops(op["handler"]) or ["pass"]]
        elif k == "raise":
            lines.append("raise e")
        elif k == "raise_user":
            lines.append("raise UserError(%r)" % op["msg"])
        elif k == "raise_exit":
            lines.append("raise GreenletExit(%s)" % op.get("value", ""))
        elif k == "return":
            lines.append("return %s" % op["value"])
        elif k == "loop":
            lines.append("for _ in range(%d):" % op["n"])
            lines += ["    " + l for l in py_ops(op["body"]) or ["pass"]]
        elif k == "settrace":
            lines.append("settrace(hook_failing_at(%s))" % op.get("fail_at"))
        elif k == "settrace_off":
            lines.append("settrace(None)")
        elif k == "thread":
            lines.append("def thread_%s():" % op["name"])
            lines += ["    " + l for l in py_ops(op["ops"]) or ["pass"]]
            lines.append("t = threading.Thread(target=thread_%s); t.start(); t.join()" % op["name"])
    return lines


# ---------------------------------------------------------------------------
# Commands


def cmd_run(args):
    rng = random.Random(args.seed)
    gen = GENERATORS[args.gen]
    programs = {i: gen(rng).program() for i in range(args.programs)}
    rs = run_batch(rust_command(args.rust), programs)
    totals = {}
    examples = {}
    for python in args.python:
        py = run_batch(py_command(python), programs)
        counts = collections.Counter()
        classes = collections.Counter()
        excluded = collections.Counter()
        for pid, prog in programs.items():
            verdict = compare(prog, py[pid], rs[pid], counts)
            if verdict is None:
                continue
            if verdict[0] == "excluded":
                excluded[verdict[1]] += 1
                continue
            classes[verdict[1]] += 1
            examples.setdefault(verdict[1], (pid, python))
        totals[python] = (counts, classes, excluded)
    print("programs: %d (seed %d, generator %s)" % (args.programs, args.seed, args.gen))
    if gen is KillShapesGen:
        print("shapes: " + ", ".join("%s %d" % kv for kv in sorted(gen.made.items())))
    for python, (counts, classes, excluded) in totals.items():
        agree = args.programs - sum(classes.values()) - sum(excluded.values())
        print("\n== %s: %d agree, %d disagree, %d excluded" % (
            python, agree, sum(classes.values()), sum(excluded.values())))
        print("normalisations applied (by name: programs where it applied):")
        for name, n in sorted(counts.items()):
            print("  %-28s %d" % (name, n))
        print("excluded (Python bugs not to copy):")
        for name, n in sorted(excluded.items()):
            print("  %-28s %d" % (name, n))
        print("disagreement classes:")
        for name, n in classes.most_common():
            print("  %5d  %s" % (n, name))
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        found = []
        for cls, (pid, python) in sorted(examples.items()):
            prog = programs[pid]
            if args.shrink:
                prog = shrink(prog, cls, py_command(python), rust_command(args.rust))
            found.append(describe(cls, prog, python, args.rust))
        with open(os.path.join(args.out, "findings.json"), "w") as f:
            json.dump(found, f, indent=1)
        print("\nshrunk examples written to %s/findings.json" % args.out)
    return 0


def describe(cls, prog, python, rust):
    py = run_batch(py_command(python), {0: prog})[0]
    rs = run_batch(rust_command(rust), {0: prog})[0]
    return {"class": cls, "program": prog, "python": as_python(prog),
            "python_log": py[1], "rust_log": rs[1], "python_status": py[0], "rust_status": rs[0]}


def cmd_one(args):
    with open(args.program) as f:
        prog = json.load(f)
    py = run_batch(py_command(args.python[0]), {0: prog})[0]
    rs = run_batch(rust_command(args.rust), {0: prog})[0]
    print(as_python(prog))
    print("\n-- python (%s)" % py[0])
    print("\n".join(py[1]))
    print("\n-- rust (%s)" % rs[0])
    print("\n".join(rs[1]))
    print("\n-- verdict:", compare(prog, py, rs, collections.Counter()))
    return 0


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="generate, run, compare, summarise")
    r.add_argument("--programs", type=int, default=1000)
    r.add_argument("--seed", type=int, default=1)
    r.add_argument("--gen", choices=sorted(GENERATORS), default="plain",
                   help="plain, or kill-shapes: each program with one shape of kill on drop")
    r.add_argument("--python", action="append", required=True, help="a venv's python (repeatable)")
    r.add_argument("--rust", required=True, help="the difftest_interp binary")
    r.add_argument("--shrink", action="store_true", help="shrink one program per class")
    r.add_argument("--out", help="directory for the shrunk examples")
    o = sub.add_parser("one", help="run one program file on both and show the logs")
    o.add_argument("program")
    o.add_argument("--python", action="append", required=True)
    o.add_argument("--rust", required=True)
    args = p.parse_args(argv[1:])
    return cmd_run(args) if args.cmd == "run" else cmd_one(args)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
