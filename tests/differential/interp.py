"""The Python side of the differential tester: runs greenlet programs (the
JSON language of FORMAT.md) on Python's greenlet and prints each one's event
log.

Usage: interp.py PROGRAMS.jsonl > LOGS.jsonl
Each input line is {"id": ..., "program": {...}}; each output line is
{"id": ..., "status": "ok" | "crash:<signal>" | "timeout" | "error:<text>",
"log": [lines]}. Every program runs in a forked child (a crash, a hang or a
leaked greenlet of one program cannot touch the next).

Owns the Python semantics of each op; uses only greenlet and the standard
library.
"""

import contextlib
import gc
import json
import os
import signal
import sys
import threading
import weakref

import greenlet
from greenlet import GreenletExit, getcurrent

TIMEOUT_SECONDS = 10


class UserError(Exception):
    """An error of the program's own code (`throw ... user`, `raise_user`,
    a failing trace hook)."""


class G(greenlet.greenlet):
    """A greenlet that knows its program name (reports print `repr`)."""

    def __repr__(self):
        return self.gname


class Machine:
    """One program's run: the handle table, the log, the finalizer refs."""

    def __init__(self, program):
        self.program = program
        self.table = {}
        self.weakrefs = []
        self.log_lines = []
        self.lock = threading.Lock()
        self.unstarted_target = None
        # Greenlets (not names: a name may be created again) that started,
        # and that the program created.
        self.started = weakref.WeakSet()
        self.relay = {}
        self.owned = set()
        self.created = weakref.WeakSet()

    # ---- logging -------------------------------------------------------

    def log(self, text, prefix=True):
        if prefix:
            text = "[%s] %s" % (running_name(), text)
        with self.lock:
            self.log_lines.append(text)

    # ---- values and errors as the log spells them ----------------------

    # ---- running -------------------------------------------------------

    def run(self):
        gc.disable()
        getcurrent().gname = "main"
        self.table["main"] = getcurrent()
        sys.stderr = ReportSink(self)
        sys.unraisablehook = self.unraisable
        frame = Frame()
        try:
            flow = self.exec(self.program["main"], frame)
            self.log("done" if flow is None else "done return %s" % fmt_value(flow[1]))
        except BaseException as e:  # noqa: BLE001 - the log says what it was
            strip(e)
            self.log("done raise %s" % fmt_error(e))
        frame.held.clear()
        if FRAMES_LOST[0]:
            self.log("py-bug frames-lost", prefix=False)
        for name in sorted(self.table):
            if name in self.owned:
                self.log("final %s %s" % (name, status(self.table[name])))
        self.log("teardown")

    def unraisable(self, info):
        # A GreenletExit as "exit" or "exit(v)", KillIgnored as "killignored"
        # (the crate's messages for them are sentences); else the text.
        err = info.exc_value
        # As for a caught error: its traceback would keep the frames it went
        # through (and the greenlets in their locals) alive, here as long as
        # the greenlet that raised it holds it (a leaked one, for ever).
        strip(err)
        text = fmt_error(err) if isinstance(err, (GreenletExit, KillIgnored)) else str(err)
        self.log("report unraisable %s %s" % (name_of(info.object), text), prefix=False)

    def exec(self, ops, frame):
        """Runs `ops`; returns None, or ("return", value)."""
        for op in ops:
            flow = self.step(op, frame)
            if flow is not None:
                return flow
        return None

    def step(self, op, frame):
        kind = op["op"]
        if kind == "create":
            spec = self.program["greenlets"][op["g"]]
            parent = self.table.get(op["parent"]) if op.get("parent") else None
            if op.get("parent") and parent is None:
                self.log("create %s skip" % op["g"])
                return None
            body = self.make_body(op["g"], spec["body"])
            g = G(run=body, parent=parent) if parent is not None else G(run=body)
            del parent
            g.gname = op["g"]
            g.owner = threading.current_thread().name
            self.created.add(g)
            if g.owner == "MainThread":
                self.owned.add(op["g"])
                self.weakrefs.append(weakref.ref(g, self.finalized(op["g"])))
            old = self.table.get(op["g"])
            self.table[op["g"]] = g
            del g
            self.log("create %s" % op["g"])
            del old
            return None
        if kind in ("switch", "throw", "kill", "set_parent", "parent", "status"):
            target = self.lookup(op)
            if target is None:
                self.log("%s %s skip" % (kind, op["g"]))
                return None
            try:
                self.handle_on(kind, op, target, frame)
            finally:
                del target
            return None
        if kind == "switch_parent":
            target = getcurrent().parent
            if target is None:
                self.log("switch_parent skip")
                return None
            self.log("switch_parent %s %s" % (name_of(target), op["value"]))
            try:
                self.call_and_log("switch_parent", lambda: target.switch(op["value"]))
            finally:
                del target
            return None
        if kind == "drop":
            old = self.table.pop(op["g"], None)
            self.log("drop %s%s" % (op["g"], "" if old is not None else " skip"))
            del old
            self.log("dropped %s" % op["g"])
            return None
        if kind == "hold":
            g = self.table.get(op["g"])
            if g is not None:
                frame.held.append(g)
            self.log("hold %s%s" % (op["g"], "" if g is not None else " skip"))
            del g
            return None
        if kind == "release":
            self.log("release")
            frame.held.clear()
            return None
        if kind == "try":
            try:
                return self.exec(op["body"], Frame.child(frame))
            except BaseException as e:  # noqa: BLE001
                strip(e)
                if op["catch"] == "exit" and not isinstance(e, GreenletExit):
                    raise
                self.log("caught %s" % fmt_error(e))
                return self.exec(op["handler"], Frame.child(frame, e))
        if kind == "raise":
            err = frame.caught
            if err is None:
                self.log("raise skip")
                return None
            self.log("reraise %s" % fmt_error(err))
            raise err
        if kind == "raise_user":
            self.log("raise user(%s)" % op["msg"])
            raise UserError(op["msg"])
        if kind == "raise_exit":
            if "value" in op:
                self.log("raise exit(%s)" % op["value"])
                raise GreenletExit(op["value"])
            self.log("raise exit")
            raise GreenletExit()
        if kind == "return":
            self.log("return %s" % op["value"])
            return ("return", op["value"])
        if kind == "loop":
            for _ in range(op["n"]):
                flow = self.exec(op["body"], frame)
                if flow is not None:
                    return flow
            return None
        if kind == "settrace":
            self.log("settrace %s" % op.get("fail_at"))
            greenlet.settrace(self.make_hook(op.get("fail_at")))
            return None
        if kind == "settrace_off":
            self.log("settrace off")
            greenlet.settrace(None)
            return None
        if kind == "thread":
            self.run_thread(op)
            return None
        raise ValueError("unknown op %r" % kind)

    def lookup(self, op):
        return self.table.get(op["g"])

    def handle_on(self, kind, op, target, frame):
        name = op["g"]
        if kind == "switch":
            self.log("switch %s %s" % (name, op["value"]))
            self.call_and_log("switch %s" % name, lambda: target.switch(op["value"]))
        elif kind == "throw":
            err = make_error(op)
            self.log("throw %s %s (%s)" % (name, fmt_error(err), status(target)))
            with self.unstarted_throw(target, relay=True):
                self.call_and_log("throw %s" % name, lambda: target.throw(err))
        elif kind == "kill":
            self.log("kill %s (%s)" % (name, status(target)))
            with self.unstarted_throw(target):
                self.call_and_log("kill %s" % name, lambda: kill(target), value=False)
        elif kind == "set_parent":
            parent = self.table.get(op["parent"])
            if parent is None:
                self.log("set_parent %s %s skip" % (name, op["parent"]))
                return
            try:
                target.parent = parent
                self.log("set_parent %s %s => ok" % (name, op["parent"]))
            except BaseException as e:  # noqa: BLE001
                strip(e)
                self.log("set_parent %s %s => err %s" % (name, op["parent"], fmt_error(e)))
            finally:
                del parent
        elif kind == "parent":
            p = target.parent
            self.log("parent %s => %s" % (name, "none" if p is None else name_of(p)))
            del p
        elif kind == "status":
            self.log("status %s => %s" % (name, status(target)))

    @contextlib.contextmanager
    def unstarted_throw(self, target, relay=False):
        """The README's difference "throwing into an unstarted greenlet kills
        it without switching to it (no trace event names it)": while such a
        throw runs, trace events naming the target are marked, and do not
        count towards the hook's failing event (the comparator removes them,
        as the normalisation `unstarted_throw_no_trace`).
        What the throw leaves goes on up the target's parent chain (an
        error, or GreenletExit as the value the target ended with), so its
        events are relayed as for an unstarted parent (below): one event
        from the thrower to the receiver.
        """
        previous = self.unstarted_target
        if not target and not target.dead:
            self.unstarted_target = None if relay else target.gname
        try:
            yield
        finally:
            self.unstarted_target = previous

    def call_and_log(self, what, fn, value=True):
        try:
            r = fn()
        except BaseException as e:  # noqa: BLE001
            strip(e)
            self.log("%s => err %s" % (what, fmt_error(e)))
            raise
        self.log("%s => ok%s" % (what, " " + fmt_value(r) if value else ""))

    def make_body(self, name, ops):
        machine = self

        def body(*args):
            me = name  # noqa: F841 - read by running_name()
            if not args:
                # py_bug_exit_as_args: greenlet passed a GreenletExit where
                # the argument tuple belongs (it reads as an empty one).
                machine.log("py-bug exit-as-args")
                raise TypeError("body() missing 1 required positional argument: 'arg'")
            (arg,) = args
            frame = Frame()
            machine.started.add(getcurrent())
            machine.log("start %s" % fmt_value(arg))
            try:
                flow = machine.exec(ops, frame)
            except BaseException as e:  # noqa: BLE001
                strip(e)
                machine.log("end raise %s" % fmt_error(e))
                frame.held.clear()
                raise
            frame.held.clear()
            if flow is None:
                machine.log("end")
                return None
            machine.log("end return %s" % fmt_value(flow[1]))
            return flow[1]

        return body

    def finalized(self, name):
        def callback(_ref):
            self.log("fin %s" % name, prefix=False)

        return callback

    def make_hook(self, fail_at):
        seen = [0]

        def hook(event, args):
            origin, target = args
            names = (name_of(origin), name_of(target))
            unstarted = target not in self.started and target in self.created
            del origin, target, args
            if self.unstarted_target in names:
                self.log("trace %s %s->%s [unstarted-throw]" % ((event,) + names), prefix=False)
                return
            # An error on its way up the parent chain that reaches an
            # unstarted parent: greenlet switches into it (it dies without
            # running) and on; the crate passes it on without switching (the
            # same README difference). The two events become one.
            if event == "throw" and unstarted:
                self.log("trace %s %s->%s [unstarted-throw]" % ((event,) + names), prefix=False)
                self.relay[names[1]] = self.relay.pop(names[0], names[0])
                return
            if names[0] in self.relay:
                names = (self.relay.pop(names[0]), names[1])
            seen[0] += 1
            self.log("trace %s %s->%s" % ((event,) + names), prefix=False)
            if fail_at is not None and seen[0] == fail_at:
                self.log("trace fail", prefix=False)
                raise UserError("hook")

        return hook

    def run_thread(self, op):
        self.log("thread %s" % op["name"])

        def main():
            getcurrent().gname = op["name"]
            self.table[op["name"]] = getcurrent()
            frame = Frame()
            try:
                self.exec(op["ops"], frame)
                self.log("thread done")
            except BaseException as e:  # noqa: BLE001
                strip(e)
                self.log("thread done raise %s" % fmt_error(e))
            frame.held.clear()

        t = threading.Thread(target=main, name=op["name"])
        t.start()
        t.join()
        self.log("joined %s" % op["name"])


class Frame:
    """One body's locals: handles it holds, the error its handler caught."""

    def __init__(self, held=None, caught=None):
        self.held = [] if held is None else held
        self.caught = caught

    @staticmethod
    def child(frame, caught=None):
        return Frame(frame.held, caught if caught is not None else frame.caught)


class ReportSink:
    """Stands in for sys.stderr: greenlet writes its "did not kill" reports
    here, piece by piece; each finished line becomes a log event."""

    def __init__(self, machine):
        self.machine = machine
        self.buffer = ""

    def write(self, text):
        self.buffer += text
        while "\n" in self.buffer:
            line, self.buffer = self.buffer.split("\n", 1)
            if line.strip():
                self.machine.log("report %s" % line.strip(), prefix=False)
        return len(text)

    def flush(self):
        pass


def kill(g):
    """The stand-in for the crate's `Greenlet::kill`, which the README says
    acts as greenlet's kill on garbage collection: the victim's parent is
    the killer for the kill (greenlet's ParentIsCurrentGuard in
    UserGreenlet::throw_GreenletExit_during_dealloc), control comes back to
    the killer, a victim that stays alive is reported as such."""
    if getattr(g, "owner", None) not in (None, threading.current_thread().name):
        # greenlet kills a collected greenlet on its own thread only (a
        # reference dropped elsewhere queues it there), as the crate's kill
        # works on the owner thread only (parent_thread_affinity); like a
        # throw from another thread, even into a dead greenlet.
        raise KillFromOtherThread()
    # The crate's kill() runs the kills other threads queued first, as
    # getcurrent() does (greenlet has no kill() to compare with).
    current = getcurrent()
    if g.dead:
        del current
        return
    if g is current or g.parent is None:
        del current
        g.throw(GreenletExit)
        return
    ancestor = current
    while ancestor is not None:
        if ancestor is g:
            del ancestor, current
            # greenlet never kills an ancestor of the current greenlet on
            # garbage collection (the child holds it): no stand-in.
            raise KillOfAncestor()
        ancestor = ancestor.parent
    old = g.parent
    g.parent = current
    del current
    try:
        g.throw(GreenletExit)
    finally:
        try:
            g.parent = old
        except ValueError as e:
            # The old parent descends from the victim by now: greenlet's
            # guard would put it back and close a loop in the parent chain,
            # which the crate refuses (the killer stays the parent).
            if "cyclic" not in str(e):
                raise
            raise KillParentLoop() from None
        finally:
            del old
    if not g.dead:
        raise KillIgnored()


class KillOfAncestor(Exception):
    """`kill` of an ancestor of the killer: nothing in greenlet to compare."""


class KillParentLoop(Exception):
    """Putting the victim's old parent back would close a parent loop."""


class KillFromOtherThread(Exception):
    """`kill` of another thread's greenlet: no kill of greenlet's does that."""


class KillIgnored(Exception):
    """The victim caught the exit and switched back alive."""


def make_error(op):
    if op["err"] == "exit":
        return GreenletExit(op["value"]) if "value" in op else GreenletExit()
    return UserError(op["msg"])


def strip(e):
    """Drops the traceback and context, which would keep frames (and the
    greenlets in their locals) alive past the point the crate drops them."""
    e.__traceback__ = None
    e.__context__ = None


# Set when running_name() found no Python frame at all (a greenlet bug).
FRAMES_LOST = [False]


def running_name():
    """The name of the greenlet that runs the op being logged: the innermost
    body's (a body's ops run in its greenlet), else its thread's main
    greenlet's. Not getcurrent(), which runs the kills other threads queued
    (the crate's does too): only the program's own operations do that."""
    try:
        f = sys._getframe()
    except ValueError:
        # greenlet lost the running frames: a queued kill run at the start
        # of a switch, whose target ended meanwhile, leaves the thread with
        # no current frame (sys._getframe() itself fails). The queue was
        # run by then, so getcurrent() runs nothing more; the program is
        # marked (py_bug_frames_lost).
        FRAMES_LOST[0] = True
        return name_of(getcurrent())
    while f is not None:
        if f.f_code.co_name == "body" and f.f_code.co_filename == __file__:
            return f.f_locals["me"]
        f = f.f_back
    thread = threading.current_thread()
    return "main" if thread is threading.main_thread() else thread.name


def name_of(g):
    return getattr(g, "gname", "?")


def status(g):
    if g.dead:
        return "dead"
    return "active" if g else "unstarted"


# The message of the GreenletExit greenlet throws into a greenlet it kills on
# garbage collection (the crate's carries no value).
GC_KILL_MESSAGE = "Killing the greenlet because all references have vanished."


def exit_args(e):
    return "" if e.args == (GC_KILL_MESSAGE,) else ",".join(str(a) for a in e.args)


def fmt_value(v):
    if v is None or v == ():
        return "none"
    if isinstance(v, GreenletExit):
        return "exitobj(%s)" % exit_args(v)
    return str(v)


def fmt_error(e):
    if isinstance(e, GreenletExit):
        return "exit(%s)" % exit_args(e) if exit_args(e) else "exit"
    if isinstance(e, UserError):
        return "user(%s)" % e.args[0]
    if isinstance(e, KillIgnored):
        return "killignored"
    if isinstance(e, KillFromOtherThread):
        return "killthread"
    if isinstance(e, KillOfAncestor):
        return "other(kill-of-ancestor)"
    if isinstance(e, KillParentLoop):
        return "other(kill-parent-loop)"
    text = str(e)
    if isinstance(e, greenlet.error):
        if "which happens to have exited" in text:
            return "threadexited"
        if "different thread" in text:
            return "wrongthread"
    if isinstance(e, ValueError) and "cyclic parent chain" in text:
        return "cycle"
    if isinstance(e, ValueError) and "different thread" in text:
        return "parentthread"
    if "main greenlet" in text and "parent" in text:
        return "mainparent"
    return "other(%s: %s)" % (type(e).__name__, text)


def run_one(program):
    """Runs one program in a forked child; returns (status, log)."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_fd)
        signal.alarm(TIMEOUT_SECONDS)
        machine = Machine(program)
        try:
            machine.run()
            result = {"status": "ok", "log": machine.log_lines}
        except BaseException as e:  # noqa: BLE001
            result = {"status": "error:%s: %s" % (type(e).__name__, e), "log": machine.log_lines}
        data = json.dumps(result).encode()
        with os.fdopen(write_fd, "wb") as out:
            out.write(data)
        os._exit(0)
    os.close(write_fd)
    with os.fdopen(read_fd, "rb") as inp:
        data = inp.read()
    _, wait_status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(wait_status):
        sig = os.WTERMSIG(wait_status)
        return ("timeout" if sig == signal.SIGALRM else "crash:%d" % sig), []
    result = json.loads(data)
    return result["status"], result["log"]


def main(argv):
    if len(argv) != 2 or argv[1] in ("-h", "--help"):
        print(__doc__)
        return 0 if len(argv) == 2 else 2
    with open(argv[1]) as inp:
        for line in inp:
            if not line.strip():
                continue
            item = json.loads(line)
            state, log = run_one(item["program"])
            print(json.dumps({"id": item["id"], "status": state, "log": log}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
