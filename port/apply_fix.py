#!/usr/bin/env python3
"""Apply one of the project's thread-state cleanup policies to an unpacked greenlet 3.5.6 tree.

Usage: apply_fix.py [--no-test-hooks] VARIANT TREE
       apply_fix.py --list

VARIANT is one of:
  stock      leave the tree unchanged (greenlet 3.5.6 as released; the model's `legacy`)
  seed       the seed report's `draining` flag (the model's `draining`)
  scheduled  a `scheduled` flag: exactly one pending call outstanding or running while the
             queue is non-empty; a failed Py_AddPendingCall clears it so the next push retries
  shielded   `scheduled`, and every thread state is destroyed with tracing/profiling suspended
             on the draining thread (PyThreadState_EnterTracing/LeaveTracing)

Every variant except `stock` also gets a test-only hook: when the environment variable
GREENLET_TEST_DRAIN_EXIT_DELAY_US is set (read once, at the first drain), the drain sleeps that many
microseconds, holding the GIL, after it found the queue empty and released the cleanup lock and
before it returns. That widens the window between "flag cleared" and "pending call returned".
--no-test-hooks leaves that hook out: the change as it would be proposed to greenlet.

Every place is found by the names and strings it contains; if any anchor is missing or ambiguous the
script stops with a message naming it and changes nothing. Applying twice is refused (the file
carries a marker).
"""

import re
import sys
from pathlib import Path

TARGET = Path("src/greenlet/TThreadStateDestroy.cpp")
MARKER = "greenlet-port policy:"
VARIANTS = ("stock", "seed", "scheduled", "shielded")
DELAY_ENV = "GREENLET_TEST_DRAIN_EXIT_DELAY_US"


class AnchorError(Exception):
    """An anchor the patch relies on was not found exactly once."""


def find_once(text, pattern, what, start=0, end=None):
    """Return the match of regex `pattern` in text[start:end]; it must occur exactly once."""
    end = len(text) if end is None else end
    hits = list(re.compile(pattern, re.S).finditer(text, start, end))
    if len(hits) != 1:
        raise AnchorError(
            f"anchor {what!r} (regex {pattern!r}) found {len(hits)} times in "
            f"{TARGET}, expected exactly once; greenlet's source differs from 3.5.6 "
            "as this script knows it: re-read the file and update the anchors"
        )
    return hits[0]


class Editor:
    """Collects non-overlapping (start, end, replacement) edits and applies them together."""

    def __init__(self, text):
        self.text = text
        self.edits = []

    def replace(self, match, new):
        self.edits.append((match.start(), match.end(), new))

    def insert_after(self, match, new):
        self.edits.append((match.end(), match.end(), new))

    def result(self):
        out = self.text
        last = None
        for start, end, new in sorted(self.edits, reverse=True):
            if last is not None and end > last:
                raise AnchorError("internal error: two edits overlap; fix apply_fix.py")
            out = out[:start] + new + out[end:]
            last = start
        return out


def span_of_function(text, name, next_name):
    """Locate the body of `name(...)` up to the definition of the next function `next_name`."""
    head = find_once(text, r"\b" + re.escape(name) + r"\s*\(\s*(void\s*\*|ThreadState\s*\*)",
                     f"definition of {name}")
    tail = find_once(text, r"static\s+\w+\s*\n?\s*" + re.escape(next_name) + r"\s*\(",
                     f"definition of {next_name} (end of {name})", head.end())
    return head.end(), tail.start()


FLAG_HELPERS = {
    "seed": """
    // greenlet-port policy: seed (draining flag).
    // True while PendingCallback_DestroyQueue is destroying a state it popped.
    // Read and written only with thread_states_to_destroy_lock held.
    static bool&
    draining()
    {
        static bool flag = false;
        return flag;
    }
""",
    "scheduled": """
    // greenlet-port policy: scheduled.
    // Invariant, under thread_states_to_destroy_lock: whenever the queue is
    // non-empty, exactly one PendingCallback_DestroyQueue is queued with
    // Py_AddPendingCall or running. Set by the push that claims the schedule,
    // cleared again if Py_AddPendingCall fails (so the next push retries), and
    // cleared by the drain when it finds the queue empty.
    static bool&
    cleanup_scheduled()
    {
        static bool flag = false;
        return flag;
    }
""",
}

SHIELD_HELPER = """
    // greenlet-port policy: shielded.
    // Destroying a thread state can run Python code (weakref callbacks and
    // __del__ methods of the dead thread's greenlets). We do that from inside a
    // pending call; on CPython 3.11 a traced or profiled function entry made
    // while a pending call is being handled, with another pending call
    // signalled, re-dispatches forever. Suspending tracing and profiling on
    // this thread for the duration of one destruction keeps that code off the
    // traced dispatch path. The cost: trace and profile functions (coverage,
    // debuggers, profilers) do not see code run by this cleanup.
    class UntracedScope
    {
    private:
        PyThreadState* const tstate;
    public:
        UntracedScope()
            : tstate(PyThreadState_GET())
        {
            PyThreadState_EnterTracing(this->tstate);
        }
        ~UntracedScope()
        {
            PyThreadState_LeaveTracing(this->tstate);
        }
    private:
        UntracedScope(const UntracedScope&);
        UntracedScope& operator=(const UntracedScope&);
    };
"""

DELAY_HELPER = f"""
    // greenlet-port: test-only window widening. If {DELAY_ENV} is set
    // (read once), the drain sleeps that many microseconds, holding the GIL,
    // after it found the queue empty and released the cleanup lock.
    static void
    TestOnlyDrainExitDelay()
    {{
        static const long delay_us = []() -> long {{
            const char* value = std::getenv("{DELAY_ENV}");
            return value ? std::strtol(value, nullptr, 10) : 0;
        }}();
        if (delay_us > 0) {{
            std::this_thread::sleep_for(std::chrono::microseconds(delay_us));
        }}
    }}
"""

SCHEDULE_COMMENT = """if (!cleanup_scheduled()) {
            // greenlet-port policy: {variant}. No pending call is queued or
            // running, so this push claims the schedule. While the flag is
            // set, the queued or running drain will see this state: it clears
            // the flag only after finding the queue empty, under this lock.
            cleanup_scheduled() = true;
            int result = AddPendingCall("""

SEED_COMMENT = """if (mod_globs->thread_states_to_destroy.size() == 1 && !draining()) {
            // greenlet-port policy: seed. A running drain (draining() set) will
            // pick this state up on its next iteration, so do not add a second
            // pending call while it runs.
            int result = AddPendingCall("""


def patch(text, variant, test_hooks=True):
    ed = Editor(text)

    # Standard headers for the test-only delay.
    inc = find_once(text, r'#include "TThreadStateCreator\.hpp"\n', "#include of TThreadStateCreator.hpp")
    if test_hooks:
        ed.insert_after(inc, "\n#include <chrono>\n#include <cstdlib>\n#include <thread>\n")

    # Private helpers go right after the struct's only `private:` label.
    struct = find_once(text, r"struct\s+ThreadState_DestroyNoGIL\s*\{", "struct ThreadState_DestroyNoGIL")
    priv = find_once(text, r"\nprivate:\n", "`private:` label of ThreadState_DestroyNoGIL", struct.end())
    helpers = FLAG_HELPERS["seed" if variant == "seed" else "scheduled"] + (DELAY_HELPER if test_hooks else "")
    if variant == "shielded":
        helpers += SHIELD_HELPER
    ed.insert_after(priv, helpers)

    # AddToCleanupQueue: when to schedule.
    a_start, a_end = span_of_function(text, "AddToCleanupQueue", "PendingCallback_DestroyQueue")
    cond = find_once(
        text,
        r"if \(mod_globs->thread_states_to_destroy\.size\(\) == 1\) \{.*?int result = AddPendingCall\(",
        "`size() == 1` schedule test in AddToCleanupQueue", a_start, a_end)
    if variant == "seed":
        ed.replace(cond, SEED_COMMENT)
    else:
        ed.replace(cond, SCHEDULE_COMMENT.replace("{variant}", variant))
        failed = find_once(text, r"if \(result < 0\) \{\n", "`result < 0` failure branch in AddToCleanupQueue",
                           cond.end(), a_end)
        ed.insert_after(failed, "                // greenlet-port: let the next push retry.\n"
                                "                cleanup_scheduled() = false;\n")
        leak = find_once(text, r'"expect a memory leak\.\\n"',
                         "'expect a memory leak' warning text in AddToCleanupQueue", failed.end(), a_end)
        ed.replace(leak, '"cleanup is retried when the next thread exits.\\n"')

    # PendingCallback_DestroyQueue: the drain loop.
    d_start, d_end = span_of_function(text, "PendingCallback_DestroyQueue", "DestroyOne")
    empty = find_once(text, r"if \(mod_globs->thread_states_to_destroy\.empty\(\)\) \{\s*break;",
                      "empty-queue break in PendingCallback_DestroyQueue", d_start, d_end)
    flag = "draining()" if variant == "seed" else "cleanup_scheduled()"
    ed.replace(empty, "if (mod_globs->thread_states_to_destroy.empty()) {\n"
                      f"                    {flag} = false;\n"
                      "                    break;")
    if variant == "seed":
        take = find_once(text, r"to_destroy = mod_globs->take_next_to_destroy\(\);",
                         "take_next_to_destroy() in PendingCallback_DestroyQueue", d_start, d_end)
        ed.replace(take, "draining() = true;\n"
                         "                to_destroy = mod_globs->take_next_to_destroy();")
    destroy = find_once(text, r"DestroyOne\(to_destroy\);(\s*\})(\s*)return 0;",
                        "DestroyOne(to_destroy) ... return 0 at the end of the drain loop", d_start, d_end)
    call = "DestroyOne(to_destroy);"
    if variant == "shielded":
        call = ("{\n"
                "                UntracedScope untraced;\n"
                "                DestroyOne(to_destroy);\n"
                "            }")
    hook = ("TestOnlyDrainExitDelay();" + destroy.group(2)) if test_hooks else ""
    ed.replace(destroy, call + destroy.group(1) + destroy.group(2) + hook + "return 0;")

    out = ed.result()
    return f"// {MARKER} {variant} (applied by port/apply_fix.py)\n" + out


def main(argv):
    if len(argv) == 2 and argv[1] == "--list":
        print("\n".join(VARIANTS))
        return 0
    test_hooks = "--no-test-hooks" not in argv
    argv = [a for a in argv if a != "--no-test-hooks"]
    if len(argv) != 3 or argv[1] not in VARIANTS:
        print(f"usage: {Path(argv[0]).name} [--no-test-hooks] {{{'|'.join(VARIANTS)}}} TREE", file=sys.stderr)
        return 2
    variant, tree = argv[1], Path(argv[2])
    target = tree / TARGET
    if not target.is_file():
        print(f"apply_fix: {target} not found: TREE must be an unpacked greenlet 3.5.6 sdist",
              file=sys.stderr)
        return 1
    text = target.read_text()
    if MARKER in text:
        print(f"apply_fix: {target} is already patched ({text.splitlines()[0]}); "
              "unpack a fresh tree", file=sys.stderr)
        return 1
    if variant == "stock":
        print(f"apply_fix: stock: {target} left unchanged")
        return 0
    try:
        new = patch(text, variant, test_hooks)
    except AnchorError as err:
        print(f"apply_fix: {variant}: {err}", file=sys.stderr)
        return 1
    target.write_text(new)
    print(f"apply_fix: {variant}{'' if test_hooks else ' (no test hooks)'}: patched {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
