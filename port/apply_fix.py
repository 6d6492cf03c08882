#!/usr/bin/env python3
"""Apply one of the project's thread-state cleanup policies to an unpacked greenlet 3.5.6 tree.

Usage: apply_fix.py [--no-test-hooks] VARIANT TREE
       apply_fix.py --list
       apply_fix.py --canonical NAME[,NAME...]
       apply_fix.py --check-locking TREE

VARIANT is one of:
  stock      leave the tree unchanged (greenlet 3.5.6 as released; the model's `legacy`)
  seed       the seed report's `draining` flag (the model's `draining`)
  scheduled  a `scheduled` flag: exactly one pending call outstanding or running while the
             queue is non-empty; a failed Py_AddPendingCall clears it so the next push retries
  robust     the recommended change: port/greenlet-thread-cleanup.patch, applied with
             `git apply` (the `scheduled` flag, and every thread state destroyed with tracing and
             profiling suspended on the draining thread, between PyThreadState_EnterTracing and
             PyThreadState_LeaveTracing; plus the patch's regression test).
             The model's `robust`. `shielded` is accepted as an alias of the same build.

Why the C++ `robust` has no retry branch although the model's `robust` has one: the model's
`robust` retries a refused schedule when a push found the flag held between the refused
Py_AddPendingCall and the flag's release. In greenlet, AddToCleanupQueue holds
thread_states_to_destroy_lock from before the flag claim until after the rollback, so no push can
run in that interval and the retry would be dead code. That makes the model's `shielded` and
`robust` the same policy here. --check-locking verifies the facts this relies on in the tree (the
lock guard is at the top level of AddToCleanupQueue and precedes the AddPendingCall call; the
drain's lock guard lives in an inner block that makes no Python or pending-call API call), and
every patch runs the same check first and refuses to patch if it fails.

Every variant except `stock` also gets a test-only hook: when the environment variable
GREENLET_TEST_DRAIN_EXIT_DELAY_US is set (read once, at the first drain), the drain sleeps that many
microseconds, holding the GIL, after it found the queue empty and released the cleanup lock and
before it returns. That widens the window between "flag cleared" and "pending call returned".
--no-test-hooks leaves that hook out; `apply_fix.py --no-test-hooks robust TREE` leaves TREE exactly
as `git apply port/greenlet-thread-cleanup.patch` does.

`seed` and `scheduled` are comparison candidates, written here by anchors: every place is found by
the names and strings it contains; if any anchor is missing or ambiguous the script stops with a
message naming it and changes nothing. Applying twice is refused (an anchored edit leaves a marker
comment in the file; the patch file does not apply to a tree that already has it).
"""

import os
import re
import subprocess
import sys
from pathlib import Path

TARGET = Path("src/greenlet/TThreadStateDestroy.cpp")
# The change proposed to greenlet, as its maintainers apply it; the `robust` build is made from it.
PATCH_FILE = Path(__file__).resolve().parent / "greenlet-thread-cleanup.patch"
MARKER = "greenlet-port policy:"
VARIANTS = ("stock", "seed", "scheduled", "robust")
# Other names accepted on command lines for the same build.
ALIASES = {"shielded": "robust"}
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

ROLLBACK = """\
                // greenlet-port: let the next push retry. No push can have
                // seen the flag set since we claimed it: cleanup_lock has
                // been held from the claim to here, so clearing it strands
                // nothing.
                cleanup_scheduled() = false;
"""

SEED_COMMENT = """if (mod_globs->thread_states_to_destroy.size() == 1 && !draining()) {
            // greenlet-port policy: seed. A running drain (draining() set) will
            // pick this state up on its next iteration, so do not add a second
            // pending call while it runs.
            int result = AddPendingCall("""


# --- The locking facts the C++ `robust` relies on -------------------------------------------------

LOCK = "thread_states_to_destroy_lock"
SUPPORT = Path("src/greenlet/greenlet_thread_support.hpp")
# Functions that may hold the cleanup lock, and the CPython API each may call while holding it.
# AddPendingCall is greenlet's wrapper around Py_AddPendingCall (checked separately).
# mod_get_pending_cleanup_count (a testing helper) holds the GIL and only builds an int.
LOCK_HOLDERS = {
    "MarkGreenletDeadIfNeeded": set(),
    "AddToCleanupQueue": {"AddPendingCall"},
    "PendingCallback_DestroyQueue": set(),
    "mod_get_pending_cleanup_count": {"PyLong_FromSize_t"},
}
# A parameter list, allowing one level of nested parentheses (greenlet writes UNUSED(arg)).
PARAMS = r"\s*\((?:[^;{()]|\([^()]*\))*\)"
# The only places outside function bodies that may name the lock: its declaration and construction.
LOCK_DECLARED_IN = "TGreenletGlobals.cpp"


def code_only(text):
    """text with comments and string/char literals replaced by spaces (same length, newlines kept)."""
    out = list(text)
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            j += 1
        else:
            i += 1
            continue
        for k in range(i, min(j, n)):
            if out[k] != "\n":
                out[k] = " "
        i = j
    return "".join(out)


def matching_brace(code, open_at):
    depth = 0
    for i in range(open_at, len(code)):
        if code[i] == "{":
            depth += 1
        elif code[i] == "}":
            depth -= 1
            if depth == 0:
                return i
    raise AnchorError(f"unbalanced braces after offset {open_at}")


def enclosing_block(code, pos, body_open):
    """The innermost {...} containing pos, searched from body_open (the function's '{')."""
    best = (body_open, matching_brace(code, body_open))
    i = body_open + 1
    while i < pos:
        if code[i] == "{":
            close = matching_brace(code, i)
            if close > pos:
                best = (i, close)
            else:
                i = close
        i += 1
    return best


def line_of(text, offset):
    return text.count("\n", 0, offset) + 1


def function_body(code, name, what_file):
    head = find_once(code, r"\b" + re.escape(name) + PARAMS + r"\s*(?:const\s*)?\{",
                     f"definition of {name} in {what_file}")
    open_at = head.end() - 1
    return head.start(), open_at, matching_brace(code, open_at)


def check_locking(tree):
    """Check, in an unpacked tree, the facts the lock-order argument of port/README.md uses.

    Returns the facts as lines "file:line: fact"; raises AnchorError if one does not hold.
    """
    facts = []
    src = Path(tree) / "src/greenlet"
    support = (Path(tree) / SUPPORT).read_text()
    scode = code_only(support)
    m = find_once(scode, r"typedef\s+std::mutex\s+Mutex\s*;", f"`typedef std::mutex Mutex` in {SUPPORT}")
    facts.append(f"{SUPPORT.name}:{line_of(support, m.start())}: Mutex is std::mutex "
                 "(not recursive, knows nothing of the GIL)")
    m = find_once(scode, r"typedef\s+std::lock_guard\s*<\s*Mutex\s*>\s+LockGuard\s*;",
                  f"`typedef std::lock_guard<Mutex> LockGuard` in {SUPPORT}")
    facts.append(f"{SUPPORT.name}:{line_of(support, m.start())}: LockGuard is std::lock_guard "
                 "(held to the end of its block, no early unlock)")

    seen_holders = set()
    for path in sorted(list(src.glob("*.cpp")) + list(src.glob("*.hpp"))):
        text = path.read_text()
        code = code_only(text)
        uses = [u.start() for u in re.finditer(r"\b" + LOCK + r"\b", code)]
        guards = list(re.finditer(r"\bLockGuard\s+\w+\s*\(\s*\*\s*mod_globs->" + LOCK + r"\s*\)\s*;", code))
        if len(uses) != len(guards) and path.name != LOCK_DECLARED_IN:
            raise AnchorError(f"{path.name} names {LOCK} other than in a LockGuard: the lock-order "
                              "argument in port/README.md does not cover that use; re-check it")
        for g in guards:
            # Which function is this guard in? The nearest known holder defined before it.
            owner = None
            for name in LOCK_HOLDERS:
                for h in re.finditer(r"\b" + re.escape(name) + PARAMS + r"\s*\{", code):
                    if h.start() < g.start() and matching_brace(code, h.end() - 1) > g.start():
                        owner = (name, h.end() - 1)
            if owner is None:
                raise AnchorError(f"{path.name}:{line_of(text, g.start())}: {LOCK} is taken in a "
                                  f"function this script does not know (known: {', '.join(LOCK_HOLDERS)}); "
                                  "re-check the lock-order argument in port/README.md")
            name, body_open = owner
            seen_holders.add(name)
            block_open, block_close = enclosing_block(code, g.start(), body_open)
            held = code[g.end():block_close]
            calls = set(re.findall(r"\b(_?Py[A-Za-z_]\w*|AddPendingCall|DestroyOne)\s*\(", held))
            extra = calls - LOCK_HOLDERS[name]
            if extra:
                raise AnchorError(f"{path.name}:{line_of(text, g.start())}: {name} calls {sorted(extra)} "
                                  f"while holding {LOCK}: the lock-order argument does not cover that")
            where = (f"{path.name}:{line_of(text, g.start())}-{line_of(text, block_close)}: {name} "
                     f"holds {LOCK}")
            if name == "AddToCleanupQueue":
                if block_open != body_open:
                    raise AnchorError(f"{where} only in an inner block: the flag claim, the call and "
                                      "the rollback would not be atomic; the C++ `robust` needs them to be")
                if re.search(r"\bunlock\s*\(", held):
                    raise AnchorError(f"{where} but unlocks early: the C++ `robust` relies on it not doing so")
                call = find_once(code, r"\bAddPendingCall\s*\(", "AddPendingCall call in AddToCleanupQueue",
                                 g.end(), block_close)
                facts.append(f"{where}, for its whole body, across AddPendingCall at line "
                             f"{line_of(text, call.start())} and the `result < 0` branch")
            elif name == "PendingCallback_DestroyQueue":
                if block_open == body_open:
                    raise AnchorError(f"{where} for its whole body: it would destroy states under the lock")
                after = find_once(code, r"\bDestroyOne\s*\(", "DestroyOne call in PendingCallback_DestroyQueue",
                                  block_close, matching_brace(code, body_open))
                facts.append(f"{where} in an inner block only (no Python or pending-call API inside); "
                             f"DestroyOne runs after the block, at line {line_of(text, after.start())}")
            else:
                got = ", ".join(sorted(calls)) or "no Python or pending-call API"
                facts.append(f"{where}; calls {got} while holding it")
        if path.name == "TThreadStateDestroy.cpp":
            s, o, c = function_body(code, "AddPendingCall", path.name)
            body = code[o:c]
            api = set(re.findall(r"\b(_?Py[A-Za-z_]\w*)\s*\(", body))
            if api != {"Py_AddPendingCall"}:
                raise AnchorError(f"{path.name}: AddPendingCall calls {sorted(api)}, expected only "
                                  "Py_AddPendingCall")
            facts.append(f"{path.name}:{line_of(text, s)}: AddPendingCall calls only Py_AddPendingCall "
                         "(after greenlet::IsShuttingDown)")
    missing = {"AddToCleanupQueue", "PendingCallback_DestroyQueue"} - seen_holders
    if missing:
        raise AnchorError(f"{LOCK} is not taken in {sorted(missing)}: greenlet's cleanup changed; "
                          "re-read it and update this script")
    return facts


def patch(text, variant):
    """The comparison candidate `variant` (seed or scheduled), written into the pristine text."""
    ed = Editor(text)

    # Private helpers go right after the struct's only `private:` label.
    struct = find_once(text, r"struct\s+ThreadState_DestroyNoGIL\s*\{", "struct ThreadState_DestroyNoGIL")
    priv = find_once(text, r"\nprivate:\n", "`private:` label of ThreadState_DestroyNoGIL", struct.end())
    ed.insert_after(priv, FLAG_HELPERS[variant])

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
        ed.insert_after(failed, ROLLBACK)
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
    return ed.result()


def add_test_hooks(text):
    """text with the test-only drain-exit delay: a private helper, called just before the drain returns."""
    ed = Editor(text)
    inc = find_once(text, r'#include "TThreadStateCreator\.hpp"\n', "#include of TThreadStateCreator.hpp")
    ed.insert_after(inc, "\n#include <chrono>\n#include <cstdlib>\n#include <thread>\n")
    # After the other private helpers, before greenlet's first private function.
    first = find_once(text, r"\n    // If the state has an allocated main greenlet:",
                      "comment opening MarkGreenletDeadIfNeeded")
    ed.replace(first, DELAY_HELPER + first.group(0))
    d_start, d_end = span_of_function(text, "PendingCallback_DestroyQueue", "DestroyOne")
    ret = find_once(text, r"return 0;", "`return 0;` at the end of PendingCallback_DestroyQueue", d_start, d_end)
    ed.replace(ret, "TestOnlyDrainExitDelay();\n        return 0;")
    return ed.result()


def apply_patch_file(tree):
    """Apply PATCH_FILE to tree with `git apply`, as a greenlet maintainer would."""
    # The tree may lie inside another git work tree (this repository's port/work); stop git from
    # finding it, or `git apply` would resolve the patch's paths against that repository's root.
    env = dict(os.environ, GIT_CEILING_DIRECTORIES=str(Path(tree).resolve().parent))
    proc = subprocess.run(["git", "apply", "--whitespace=error-all", str(PATCH_FILE)], cwd=tree, env=env,
                          capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise AnchorError(f"`git apply {PATCH_FILE.name}` failed in {tree} (a greenlet 3.5.6 tree, "
                          f"not yet patched, is expected): {proc.stderr.strip()}")


def apply_variant(tree, variant, test_hooks):
    """Write `variant` into the unpacked tree; the tree's TARGET must be unpatched."""
    target = tree / TARGET
    if variant == "robust":
        apply_patch_file(tree)
        text = target.read_text()
    else:
        text = patch(target.read_text(), variant)
    if variant != "robust" or test_hooks:
        if test_hooks:
            text = add_test_hooks(text)
        text = f"// {MARKER} {variant} (applied by port/apply_fix.py)\n" + text
    target.write_text(text)


def canonical(names):
    """Map a comma-separated list of variant names (aliases allowed) to the variants' own names."""
    out = []
    for name in names.split(","):
        name = ALIASES.get(name, name)
        if name not in VARIANTS:
            raise ValueError(f"unknown variant {name!r}: use one of {', '.join(VARIANTS)} "
                             f"(aliases: {', '.join(f'{a}={v}' for a, v in ALIASES.items())})")
        out.append(name)
    return out


def main(argv):
    if len(argv) == 2 and argv[1] == "--list":
        print("\n".join(VARIANTS))
        return 0
    if len(argv) == 3 and argv[1] == "--canonical":
        try:
            print(",".join(canonical(argv[2])))
        except ValueError as err:
            print(f"apply_fix: {err}", file=sys.stderr)
            return 2
        return 0
    if len(argv) == 3 and argv[1] == "--check-locking":
        try:
            facts = check_locking(argv[2])
        except (AnchorError, OSError) as err:
            print(f"apply_fix: locking check failed: {err}", file=sys.stderr)
            return 1
        print("\n".join(facts))
        return 0
    test_hooks = "--no-test-hooks" not in argv
    argv = [a for a in argv if a != "--no-test-hooks"]
    if len(argv) == 3:
        argv[1] = ALIASES.get(argv[1], argv[1])
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
        # The flag protocol of every patched variant assumes the locking checked here.
        check_locking(tree)
        apply_variant(tree, variant, test_hooks)
    except (AnchorError, OSError) as err:
        print(f"apply_fix: {variant}: {err}", file=sys.stderr)
        return 1
    print(f"apply_fix: {variant}{'' if test_hooks else ' (no test hooks)'}: patched {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
