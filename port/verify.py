#!/usr/bin/env python3
"""Run every scenario on every build and interpreter and print one table next to the model's verdicts.

Driven by port/verify.sh (see there for the options). Needs the venvs from port/build.sh.

Rows: build x interpreter x scenario x mode -> hangs/N, finished/N, leaks (a finished run whose
cleanup queue did not empty or whose callbacks did not all run), other errors, and the Rust model's
verdicts for the same cell, computed from the repository (--model-dir, default: this checkout):
  explore: `cargo run --release --example explore -- --table --format tsv`
           (scenario python policy mode livelock leak), shown as livelock/leak
  matrix:  `cargo run --release --example matrix -- --runs N --format tsv` (the live shim running
           the seed reproducer; python policy mode runs hangs green), shown as hangs/runs on the
           seed rows
Builds map to model policies: stock = legacy, seed = draining, scheduled = scheduled,
robust = robust (`shielded` is accepted as another name of the robust build). For robust rows the
table also shows the model's `shielded` verdict: the two differ only where a push lands between a
refused Py_AddPendingCall and the flag's release, which greenlet's lock rules out (port/README.md).
Modes (the live shim's names): trace = sys.settrace with a Python function, ctrace = a C trace
function (coverage.py's CTracer), profile = a C profile function (cProfile), pyprofile =
sys.setprofile with a Python function, none. The explorer's table may name its modes differently
(it had only trace/profile/none): each port mode is matched to the first of its candidates
(EXPLORE_MODE_CANDIDATES) that the table contains, and the cell says "no cell" when none is.
Scenarios: seed (scenarios/seed.py), churn (scenarios/churn.py with slowly exiting threads),
churn+delay (the same with GREENLET_TEST_DRAIN_EXIT_DELAY_US, the test-only window widening; the
model's prediction for it is its churn verdict, whose livelock is a rare window without the delay),
and ringfull (scenarios/ringfull.py; the model's full-ring).
"""
import argparse
import concurrent.futures as cf
import datetime
import os
import subprocess
import sys
import time
from pathlib import Path

from apply_fix import canonical

PORT = Path(__file__).resolve().parent
WORK = PORT / "work"
POLICY = {"stock": "legacy", "seed": "draining", "scheduled": "scheduled", "robust": "robust"}
# A second model policy shown next to a build's own, and why they may differ.
ALSO = {"robust": ("shielded", "model shielded = robust without the retry of a refused schedule; "
                   "its full-ring leak needs a push between the refused Py_AddPendingCall and the "
                   "flag's release, which greenlet's cleanup lock rules out (port/README.md)")}
DELAY_ENV = "GREENLET_TEST_DRAIN_EXIT_DELAY_US"


MODEL_SCENARIO_CANDIDATES = {"seed": ["seed"], "churn": ["churn"], "churn+delay": ["churn"],
                             "ringfull": ["full-ring", "ringfull", "full_ring"]}
# Mode names follow the model's live shim (reproduce/matrix): (scenario --mode, --tracer).
MODES = {"trace": ("trace", "py"), "ctrace": ("trace", "c"), "profile": ("profile", "c"),
         "pyprofile": ("profile", "py"), "none": ("none", "c")}
# Which explorer mode stands for each port mode, best first. The explorer's livelock does not
# depend on the trace function's language (3.11 checks the breaker before calling any trace
# function), so trace and ctrace stand in for each other. A Python profile function is different:
# the pending call is then usually handled inside the profile function, untraced. The explorer's
# `profile` is a C profile function, so `pyprofile` has no stand-in.
EXPLORE_MODE_CANDIDATES = {"trace": ["trace", "ctrace"], "ctrace": ["ctrace", "trace"],
                           "profile": ["profile", "cprofile"], "pyprofile": ["pyprofile"],
                           "none": ["none"]}
NO_CELL = "no cell"


def scenario_cmd(name, python, mode_name, timeout, quick):
    mode, tracer = MODES[mode_name]
    common = ["--mode", mode, "--tracer", tracer, "--timeout", str(timeout)]
    if name in ("seed", "ringfull"):
        return [python, str(PORT / f"scenarios/{name}.py")] + common, {}
    waves = "25" if quick else "60"
    cmd = [python, str(PORT / "scenarios/churn.py")] + common + [
           "--waves", waves, "--threads", "8", "--slow-exit-us", "3000", "--settle", "2"]
    env = {DELAY_ENV: "2000"} if name == "churn+delay" else {}
    return cmd, env


def run_once(cell, timeout, quick):
    build, pyver, scen, mode = cell
    python = str(WORK / f"venv-{build}-{pyver}" / "bin" / "python")
    cmd, extra = scenario_cmd(scen, python, mode, timeout, quick)
    env = dict(os.environ)
    env.pop(DELAY_ENV, None)
    env.update(extra)
    t0 = time.monotonic()
    try:
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout + 30)
        rc, out, err = p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired:
        rc, out, err = "backstop", "", "killed by verify.py's backstop timeout"
    dt = time.monotonic() - t0
    if rc == 1 and "Timeout (" in err:
        return "hang", dt, err.splitlines()[:8]
    if rc == "backstop":
        return "hang", dt, [err]
    if rc == 0 and ("GREEN" in out or "CHURN" in out or "RINGFULL" in out):
        line = out.strip().splitlines()[-1]
        leak = (("CHURN leak" in line) or ("RINGFULL leak" in line)
                or (" left 0 " not in line and line.startswith("GREEN")))
        return ("leak" if leak else "finished"), dt, [line]
    return "error", dt, [f"rc={rc}"] + (out + err).strip().splitlines()[-6:]


def short_py(v):
    return ".".join(str(v).split(".")[:2])


def run_model(model_dir, runs):
    """Return (explore dict, matrix dict, notes). Keys normalised to (scenario?, python, policy, mode)."""
    notes = []
    explore, matrix = None, None
    if not (Path(model_dir) / "Cargo.toml").is_file():
        return None, None, [f"model: unavailable (no Cargo.toml in {model_dir})"]

    try:
        rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=model_dir, capture_output=True,
                             text=True, timeout=60).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "src", "examples", "Cargo.toml"],
                               cwd=model_dir, capture_output=True, text=True, timeout=60).stdout.strip()
        notes.append(f"model: {model_dir} at commit {rev or '?'}"
                     + (" with uncommitted changes under src/ or examples/" if dirty else ""))
    except (OSError, subprocess.TimeoutExpired) as e:
        notes.append(f"model: {model_dir}, commit unknown ({e})")

    # matrix runs the `reproduce` example next to itself: build it first.
    try:
        subprocess.run(["cargo", "build", "--quiet", "--release", "--example", "reproduce"],
                       cwd=model_dir, capture_output=True, text=True, timeout=1800)
    except (OSError, subprocess.TimeoutExpired) as e:
        notes.append(f"model reproduce: build failed ({e})")

    def cargo(args, what):
        try:
            p = subprocess.run(["cargo", "run", "--quiet", "--release", "--example"] + args,
                               cwd=model_dir, capture_output=True, text=True, timeout=1800)
        except (OSError, subprocess.TimeoutExpired) as e:
            notes.append(f"model {what}: unavailable ({e})")
            return None
        if p.returncode != 0:
            reason = (p.stderr.strip().splitlines() or ["no output"])[-1][:160]
            notes.append(f"model {what}: unavailable (cargo exited {p.returncode}: {reason})")
            return None
        rows = [r.split("\t") for r in p.stdout.strip().splitlines() if r.strip()]
        if not rows:
            notes.append(f"model {what}: unavailable (no output)")
            return None
        return rows

    rows = cargo(["explore", "--", "--table", "--format", "tsv"], "explore")
    if rows:
        head = [h.strip().lower() for h in rows[0]]
        need = ["scenario", "python", "policy", "mode", "livelock", "leak"]
        if all(h in head for h in need):
            explore = {}
            for r in rows[1:]:
                d = dict(zip(head, (c.strip() for c in r)))
                explore[(d["scenario"].lower(), short_py(d["python"]), d["policy"].lower(),
                         d["mode"].lower())] = (d["livelock"], d["leak"])
        else:
            notes.append(f"model explore: unavailable (header {rows[0]} lacks {need})")
    rows = cargo(["matrix", "--", "--runs", str(runs), "--format", "tsv"], "matrix")
    if rows:
        head = [h.strip().lower() for h in rows[0]]
        need = ["python", "policy", "mode", "runs", "hangs", "green"]
        if all(h in head for h in need):
            matrix = {}
            for r in rows[1:]:
                d = dict(zip(head, (c.strip() for c in r)))
                matrix[(short_py(d["python"]), d["policy"].lower(), d["mode"].lower())] = \
                    (d["hangs"], d["runs"], d["green"])
        else:
            notes.append(f"model matrix: unavailable (header {rows[0]} lacks {need})")
    return explore, matrix, notes


def pick(candidates, available):
    """The first candidate name the model's table contains, or None."""
    return next((c for c in candidates if c in available), None)


class Model:
    """The model's verdicts, looked up with the port's names (see the module docstring)."""

    def __init__(self, explore, matrix, notes):
        self.explore, self.matrix, self.notes = explore, matrix, list(notes)
        self.explore_modes = {k[3] for k in explore} if explore else set()
        self.explore_scenarios = {k[0] for k in explore} if explore else set()
        self.explore_policies = {k[2] for k in explore} if explore else set()

    def explore_mode(self, mode):
        return pick(EXPLORE_MODE_CANDIDATES.get(mode, [mode]), self.explore_modes)

    def explore_cell(self, scenario, python, policy, mode):
        """'livelock/leak' from the explorer, 'unavailable', or NO_CELL."""
        if self.explore is None:
            return "unavailable"
        scen = pick(MODEL_SCENARIO_CANDIDATES[scenario], self.explore_scenarios)
        emode = self.explore_mode(mode)
        v = self.explore.get((scen, short_py(python), policy, emode)) if scen and emode else None
        return f"{v[0]}/{v[1]}" if v else NO_CELL

    def live_cell(self, scenario, python, policy, mode):
        """'hangs/runs' from the live shim (seed rows only), '-', 'unavailable', or NO_CELL."""
        if scenario != "seed":
            return "-"
        if self.matrix is None:
            return "unavailable"
        v = self.matrix.get((short_py(python), policy, mode))
        return f"{v[0]}/{v[1]}" if v else NO_CELL

    def mode_notes(self, modes):
        if self.explore is None:
            return []
        out = []
        for m in modes:
            em = self.explore_mode(m)
            if em is None:
                out.append(f"model explore: no cell for mode {m} (the explorer's modes are "
                           f"{', '.join(sorted(self.explore_modes))})")
            elif em != m:
                out.append(f"model explore: port mode {m} is compared with the explorer's {em}")
        for pol in sorted(set(POLICY.values()) | {a for a, _ in ALSO.values()}):
            if pol not in self.explore_policies:
                out.append(f"model explore: no policy {pol} in the explorer's table")
        return out


def agreement(scenario, mode, kinds, explore_cell, live_cell):
    """Compare a cell's real outcomes with the model ('yes/no' = explorer livelock/leak).

    ringfull runs its two deaths one after the other, so only its leak verdict is comparable. For a
    Python profile function the explorer has no cell; the live shim's verdict (which models the
    pending call being run inside the profile function, untraced) is then the one compared, on the
    seed rows.
    """
    hung, leaked = "hang" in kinds, "leak" in kinds
    if "/" not in explore_cell:
        if "/" in live_cell:
            live_hangs = not live_cell.startswith("0/")
            return "match (live shim)" if live_hangs == hung else \
                ("hang the live shim rules out" if hung else "live shim hangs, real build did not")
        return "-"
    livelock, leak = (v == "yes" for v in explore_cell.split("/"))
    notes = []
    if scenario == "ringfull":
        pass
    elif livelock and not hung:
        if scenario == "churn":
            notes.append("livelock not hit (rare window; see churn+delay)")
        else:
            notes.append("livelock not hit")
    elif hung and not livelock:
        notes.append("hang the model rules out")
    if leak and not leaked and not hung:
        notes.append("leak not hit")
    elif leaked and not leak:
        notes.append("leak the model rules out")
    return "; ".join(notes) or "match"


def pivot(cells, results, modes, model):
    """One row per build x interpreter x scenario, one hangs/N column per mode."""
    rows = {}
    for c in cells:
        b, p, s, m = c
        rows.setdefault((b, p, s), {})[m] = [r[0] for r in results[c]]
    hdr = ["build", "python", "scenario"] + [f"{m} hangs" for m in modes] + [
        "leaks", "explore livelock (" + "/".join(modes) + ")", "explore leak",
        "live seed hangs (" + "/".join(modes) + ")"]
    out = []
    for (b, p, s), per_mode in rows.items():
        pol = POLICY[b]
        row = [b, p, s]
        row += [f"{per_mode[m].count('hang')}/{len(per_mode[m])}" for m in modes]
        row.append(str(sum(k.count("leak") for k in per_mode.values())))
        cellv = [model.explore_cell(s, p, pol, m) for m in modes]
        row.append(" ".join(v.split("/")[0] if "/" in v else ("-" if v == NO_CELL else v) for v in cellv))
        leaks = {v.split("/")[1] for v in cellv if "/" in v}
        row.append("/".join(sorted(leaks)) or "-")
        if s != "seed":
            row.append("-")
        else:
            row.append(" ".join(model.live_cell(s, p, pol, m).replace(NO_CELL, "-") for m in modes))
        out.append(row)
    return hdr, out


def print_table(hdr, table):
    widths = [max(len(str(r[i])) for r in [hdr] + table) for i in range(len(hdr))]

    def fmt(r):
        return "| " + " | ".join(str(x).ljust(w) for x, w in zip(r, widths)) + " |"
    print(fmt(hdr))
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for r in table:
        print(fmt(r))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--runs", type=int, default=None)
    ap.add_argument("--builds", default="stock,seed,scheduled,robust")
    ap.add_argument("--pythons", default="3.11.7,3.12.1,3.13.0")
    ap.add_argument("--scenarios", default="seed,churn,churn+delay,ringfull")
    ap.add_argument("--modes", default=None)
    ap.add_argument("--timeout", type=float, default=None)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--model-dir", default=str(PORT.parent))
    ap.add_argument("--no-model", action="store_true")
    ap.add_argument("--log", default=str(WORK / "logs" / "verify-last.log"))
    args = ap.parse_args()
    runs = args.runs or (2 if args.quick else 5)
    timeout = args.timeout or (6.0 if args.quick else 10.0)
    modes = (args.modes or ("ctrace" if args.quick else "ctrace,trace,profile,pyprofile")).split(",")
    unknown = [m for m in modes if m not in MODES]
    if unknown:
        print(f"verify: unknown mode(s) {unknown}: use {', '.join(MODES)}", file=sys.stderr)
        return 2
    try:
        builds = canonical(args.builds)
    except ValueError as err:
        print(f"verify: {err}", file=sys.stderr)
        return 2
    pythons = args.pythons.split(",")
    scenarios = args.scenarios.split(",")
    bad = [s for s in scenarios if s not in MODEL_SCENARIO_CANDIDATES]
    if bad:
        print(f"verify: unknown scenario(s) {bad}: use {', '.join(MODEL_SCENARIO_CANDIDATES)}",
              file=sys.stderr)
        return 2

    missing = [f"{b}-{p}" for b in builds for p in pythons
               if not (WORK / f"venv-{b}-{p}" / ".greenlet-port-stamp").is_file()]
    if missing:
        print(f"verify: missing builds {missing}: run port/build.sh first", file=sys.stderr)
        return 2

    started = datetime.datetime.now(datetime.timezone.utc)
    t0 = time.monotonic()
    # The model first, alone: its live shim is timing-sensitive too, and there are 2 cores.
    if args.no_model:
        model = Model(None, None, ["model: unavailable (--no-model)"])
    else:
        model = Model(*run_model(args.model_dir, runs))
    model_s = time.monotonic() - t0
    cells = [(b, p, s, m) for b in builds for p in pythons for s in scenarios for m in modes]
    results = {c: [] for c in cells}
    with cf.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        jobs = {pool.submit(run_once, c, timeout, args.quick): c for c in cells for _ in range(runs)}
        for fut in cf.as_completed(jobs):
            results[jobs[fut]].append(fut.result())
    elapsed = time.monotonic() - t0

    also_hdr = " / ".join(sorted({a for a, _ in ALSO.values()}))
    hdr = ["build", "python", "scenario", "mode", "hangs", "finished", "leaks", "errors",
           "model policy", "explore (livelock/leak)", f"explore {also_hdr}",
           "live seed (hangs/runs)", "agreement"]
    table = []
    for c in cells:
        b, p, s, m = c
        kinds = [r[0] for r in results[c]]
        n = len(kinds)
        pol = POLICY[b]
        ex = model.explore_cell(s, p, pol, m)
        alt = model.explore_cell(s, p, ALSO[b][0], m) if b in ALSO else "-"
        mx = model.live_cell(s, p, pol, m)
        table.append([b, p, s, m, f"{kinds.count('hang')}/{n}",
                      f"{kinds.count('finished') + kinds.count('leak')}/{n}",
                      str(kinds.count("leak")), str(kinds.count("error")), pol, ex, alt, mx,
                      agreement(s, m, kinds, ex, mx)])
    model_src = "no model" if args.no_model else f"model from {args.model_dir} ({model_s:.0f}s)"
    print(f"verify: {started:%Y-%m-%d %H:%M} UTC, runs={runs} per cell, timeout={timeout:g}s, "
          f"jobs={args.jobs}, {'quick' if args.quick else 'full'}; {model_src}; wall time {elapsed:.0f}s")
    print_table(hdr, table)
    if len(modes) > 1:
        print()
        print("Compact view (same runs): hangs/N per mode")
        print_table(*pivot(cells, results, modes, model))
    for b in builds:
        if b in ALSO:
            print(f"note: {b} rows: {ALSO[b][1]}")
    for n in model.notes + model.mode_notes(modes):
        print(n)
    Path(args.log).parent.mkdir(parents=True, exist_ok=True)
    with open(args.log, "w") as f:
        for c in cells:
            for kind, dt, detail in results[c]:
                f.write(f"{'/'.join(c)}\t{kind}\t{dt:.1f}s\t{' | '.join(detail)}\n")
    print(f"per-run details: {args.log}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
