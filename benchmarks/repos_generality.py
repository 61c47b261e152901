"""Do repo tasks work on the projects users bring? Fetch, prepare and make tasks from popular
pure-Python PyPI projects that vary in build backend, pytest config and layout.

    nice -n 10 python benchmarks/repos_generality.py [--only NAME ...] [--n 10] [--k 2-4]
        [--max-candidates 80] [--parallel 1] [--grade-limit 10]
        [--out results/repos/generality.json]
    python benchmarks/repos_generality.py --compare EARLIER.json   # the before/after table

Per project: whether it fetched, prepared, how many tasks were built (``--k`` a number or a
range the tasks take in turn) beside how many the valid mutations could make (the upper bound
of the combination search), the seconds make-tasks took after preparing (and preparing's own),
the funnel (candidates, valid, rejected by reason, sites set aside, combinations built and
rejected), and otherwise the reason the user would see; what prepare dropped from the project's
addopts; the share of valid mutations that only crash at first call (dropped by default, so no
built task holds one); and, on the first ``--grade-limit`` tasks built, how often v1 and v2 pay
the oracle and the no-op baselines. Needs network (PyPI) and bubblewrap.

A stopped run keeps what it did: a project's row is merged into ``--out`` as soon as its tasks
are made (before grading, again after), rows of projects not run keep the command that made
them, ``--project-limit`` ends a project's make-tasks with a row that says where it stopped
(``stopped``: the stage, candidates validated, tasks written), and SIGTERM or SIGINT writes such
a row for the project under way before the run exits.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import signal
import sys
import tempfile
import threading
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from verigap.errors import VerigapError
from verigap.repos import baselines, warm
from verigap.repos.graders import v1, v2
from verigap.repos.paid import keep_if_paid
from verigap.repos.prepare import prepare
from verigap.repos.tasks import load_tasks, make_tasks, materialize_workspace, prepared_for
from verigap.repos.views import generality_table
from verigap.results import read_meta, read_result, write_result

#: (requirement, test deps, what makes it a different case)
PROJECTS: list[tuple[str, list[str], str]] = [
    ("semver==3.0.2", [], "setuptools_scm, src layout, setup.cfg addopts with --cov"),
    ("wcwidth==0.2.13", [], "tox.ini addopts with --cov and --color=yes"),
    ("tabulate==0.9.0", [], "setuptools_scm dynamic version, a CLI test runs python -m"),
    ("cachetools==5.3.3", [], "setup.cfg metadata, src layout, tests shared through mixins"),
    ("humanize==4.9.0", ["freezegun"], "hatchling + hatch-vcs, src layout, --color=yes"),
    ("more-itertools==10.5.0", [], "flit_core backend, unittest-style tests"),
    ("idna==3.7", [], "flit_core backend, unittest tests, data tables"),
    ("inflection==0.5.1", [], "setup.py only, one test module, parametrized"),
    ("toolz==1.0.0", [], "versioneer, tests inside the package"),
    ("six==1.16.0", [], "single-module project, setup.py"),
    ("parse==1.20.1", [], "pyproject setuptools, single module, dynamic version"),
    ("jmespath==1.0.1", [], "setup.py, data-driven compliance tests"),
    ("sortedcontainers==2.4.0", [], "class-heavy (sorted list/dict/set), setup.py"),
    ("pathspec==0.12.1", [], "class-heavy (pattern classes), flit_core, unittest tests"),
    ("sqlparse==0.5.0", [], "class-heavy (token tree), hatchling, tests in the sdist"),
    ("itsdangerous==2.2.0", ["freezegun"], "class-heavy (signers), flit_core, src layout"),
    ("packaging==24.1", ["pretend"], "class-heavy (Version, SpecifierSet), flit_core"),
    ("tomli==2.0.1", [], "flit_core, src layout, data-file driven tests"),
    ("boltons==24.0.0", [], "class-heavy (ordered multidicts, indexed sets), many modules"),
    ("schema==0.7.7", [], "class-heavy (Schema, And, Or), single module, setup.py"),
    (
        "blinker==1.8.2",
        ["pytest-asyncio"],
        "class-heavy (signals, namespaces), flit_core, src layout, asyncio_mode in its config",
    ),
    (
        "prettytable==3.10.0",
        ["pytest-lazy-fixtures"],
        "class-heavy (one large table class), hatchling + hatch-vcs, src layout",
    ),
    ("rfc3986==2.0.0", [], "class-heavy (URI references, validators), setup.py, a conftest"),
    ("isodate==0.6.1", [], "setup.py, src layout, unittest tests inside the package"),
    ("webcolors==24.8.0", [], "pyproject setuptools, unittest tests against a conformance table"),
    (
        "mistune==3.0.2",
        [],
        "class-heavy (renderers, plugins), test cases read from data files by a base class",
    ),
]


def grade_tasks(tasks_dir: Path, limit: int) -> dict:
    """How v1 and v2 pay the oracle and the no-op on the first ``limit`` tasks."""
    paid = {f"{g}/{a}": 0 for g in ("v1", "v2") for a in ("oracle", "noop")}
    correct_oracle = 0
    tasks = load_tasks(tasks_dir)[:limit]
    for t in tasks:
        p = prepared_for(t)
        for agent in ("oracle", "noop"):
            with tempfile.TemporaryDirectory() as tmp:
                ws = materialize_workspace(p, t, Path(tmp) / "ws")
                for f, text in baselines.edits(agent, t, p).items():
                    (ws / f).write_text(text)
                truth = v2.evaluate(t, ws, prepared=p)
                g2 = v2.grade(t, ws, prepared=p, truth=truth)
                g1 = v1.grade(t, ws, prepared=p, truth=truth)
                paid[f"v2/{agent}"] += g2.reward > 0
                paid[f"v1/{agent}"] += g1.reward > 0
                correct_oracle += agent == "oracle" and g2.correct
    return {"graded": len(tasks), "paid": paid, "oracle_correct": correct_oracle}


def one(spec: str, deps: list[str], args, work: Path, log, progress: dict, save) -> dict:
    """One project's row. ``progress`` is kept current (the row so far, the stage, the task
    folder) for a caller stopped from outside; ``save(row)`` is called once the tasks are made,
    before grading, so a run stopped while grading keeps them."""
    rec: dict = {
        "spec": spec,
        "test_deps": deps,
        "fetched": False,
        "prepared": False,
        "tasks": 0,
        "reason": "",
    }
    progress.update(row=rec, stage="prepare", t0=time.perf_counter())
    t0 = time.perf_counter()
    try:
        p = prepare(spec, test_deps=deps)
    except VerigapError as e:
        msg = str(e)
        rec["fetched"] = not msg.startswith("could not download")
        rec["reason"] = msg[:3000]
        rec["stage"] = "fetch" if not rec["fetched"] else "prepare"
        return rec
    rec.update(
        fetched=True,
        prepared=True,
        passing=len(p.passing),
        not_passing=len(p.not_passing),
        reached_functions=len(p.reach),
        stripped_addopts=p.stripped_addopts,
        plugins=p.plugins,
        suite_s=p.baseline_s,
        prepare_s=p.prepare_s,
    )
    out = work / spec.split("==")[0]
    progress["out"] = out
    stats = make_tasks(
        spec,
        out,
        k=args.k,
        n=args.n,
        max_candidates=args.max_candidates,
        seed=0,
        test_deps=deps,
        workers=args.workers,
        time_limit_s=args.project_limit,
        keep=keep_if_paid,
        on_stage=lambda name: progress.update(stage=name),
        log=log,
    )
    rec.update(
        k=args.k,
        tasks=stats.tasks,
        upper_bound=stats.upper_bound,
        upper_bound_capped=stats.upper_bound_capped,
        candidates=stats.candidates,
        valid=stats.valid,
        crashy_valid=stats.crashy_valid,
        rejected=stats.rejected,
        task_rejected=stats.task_rejected,
        warnings=stats.warnings,
        hints=stats.hints,
        make_tasks_s=round(stats.total_s - stats.prepare_s, 1),
        funnel={
            "candidates": stats.candidates,
            "validated": stats.validated,
            "valid": stats.valid,
            "sites_set_aside": stats.site_rejected,
            "site_routes": stats.site_routes,
            "combinations_built": stats.combos_tried,
            "tasks": stats.tasks,
            "validate_s": stats.validate_s,
            "tasks_s": stats.tasks_s,
            "validated_cached": stats.validated_cached,
            "phase_s": stats.phase_s,
        },
        k_made=stats.k_made,
        cross_file=stats.cross_file,
        method_sites=stats.method_sites,
        stopped=stats.stopped,
    )
    n_valid = rec["valid"] + rec["crashy_valid"]
    rec["crash_share_valid"] = round(rec["crashy_valid"] / n_valid, 3) if n_valid else None
    if rec["tasks"]:
        rec["grading"] = {"pending": True}
        rec["total_s"] = round(time.perf_counter() - t0, 1)
        save(rec)
        progress["stage"] = "grading"
        t_grade = time.perf_counter()
        rec["grading"] = grade_tasks(out, args.grade_limit)
        rec["grading"]["seconds"] = round(time.perf_counter() - t_grade, 1)
        rec["reason"] = ""
    else:
        rec["reason"] = "0 tasks: " + "; ".join(rec["hints"]) if rec["hints"] else "0 tasks"
    rec["total_s"] = round(time.perf_counter() - t0, 1)
    return rec


def stopped_row(spec: str, deps: list[str], progress: dict, why: str) -> dict:
    """The row of a project stopped from outside: what it had, and where it stopped."""
    rec = dict(progress.get("row") or {"spec": spec, "test_deps": deps, "fetched": False})
    rec.setdefault("prepared", False)
    out = progress.get("out")
    files = sorted(p.name for p in out.glob("*.json") if p.name != "index.json") if out else []
    rec["tasks"] = len(files)
    stage = progress.get("stage", "start")
    secs = time.perf_counter() - progress.get("t0", time.perf_counter())
    rec["stopped"] = f"{why} in {stage} after {secs:.0f} s: {len(files)} task(s) written"
    rec["reason"] = rec["stopped"]
    rec["grading"] = rec.get("grading") if isinstance(rec.get("grading"), dict) else None
    return rec


def is_graded(r: dict) -> bool:
    """Whether a row's tasks were graded (not pending, not stopped before grading)."""
    g = r.get("grading")
    return bool(r["tasks"]) and isinstance(g, dict) and "paid" in g


def summary(rows: list[dict]) -> dict:
    built = [r for r in rows if is_graded(r)]
    paid = {}
    for r in built:
        for key, v in r["grading"]["paid"].items():
            paid[key] = paid.get(key, 0) + v
    graded = sum(r["grading"]["graded"] for r in built)
    valid = sum(r.get("valid", 0) + r.get("crashy_valid", 0) for r in rows)
    crashy = sum(r.get("crashy_valid", 0) for r in rows)
    searched = [r for r in rows if "upper_bound" in r]  # rows made by the combination search
    # a project that made fewer than 10 tasks never reached 10: it counts as slower than any
    times = sorted(r["make_tasks_s"] if r["tasks"] >= 10 else float("inf") for r in searched)
    median = times[len(times) // 2] if times else None
    return {
        "projects": len(rows),
        "fetched": sum(r["fetched"] for r in rows),
        "searched": len(searched),
        "with_10_tasks": sum(1 for r in searched if r["tasks"] >= 10),
        "median_s_to_10_tasks": median if median != float("inf") else None,
        "prepared": sum(r["prepared"] for r in rows),
        "with_tasks": sum(1 for r in rows if r["tasks"]),
        "tasks": sum(r["tasks"] for r in rows),
        "graded_tasks": graded,
        "paid_rate": {k: round(v / graded, 3) for k, v in sorted(paid.items())} if graded else {},
        "crash_share_of_valid_mutations": round(crashy / valid, 3) if valid else None,
        "crash_share_of_sites_in_tasks": 0.0 if built else None,
    }


def table(data: dict) -> str:
    """The Markdown table docs/repos.md shows (its ``repos_generality`` view)."""
    return generality_table(data)


def _brief(r: dict) -> dict:
    """What the before/after table compares of one project's row."""
    f = r.get("funnel", {})
    return {
        "tasks": r["tasks"],
        "k": r.get("k"),
        "upper_bound": r.get("upper_bound"),
        "make_tasks_s": r.get("make_tasks_s"),
        "validate_s": f.get("validate_s"),
        "tasks_s": f.get("tasks_s"),
        "phase_s": f.get("phase_s"),
        "candidates": r.get("candidates"),
        "valid": r.get("valid"),
        "method_sites": r.get("method_sites"),
        "stopped": r.get("stopped") or "",
        "validated": f.get("validated"),
        "k_made": r.get("k_made"),
        "grading": r.get("grading"),
        "reason": r["reason"][:300],
        "command": r.get("command"),
    }


def compare(before: Path, after: Path, out: Path, command: str) -> None:
    """Write, per project rerun since ``before`` (a results file an earlier run committed),
    its row before and after, from the two results files as they stand; a project ``before``
    has no row for is listed with ``before: null``."""
    old = {r["spec"]: r for r in read_result(before)["projects"]}
    new_data = read_result(after)
    after_cmd = read_meta(after)["command"]
    rows = []
    for r in new_data["projects"]:
        r = {**r, "command": r.get("command", after_cmd)}
        prev = old.get(r["spec"])
        if prev is None:  # a project the earlier run did not have
            rows.append({"spec": r["spec"], "before": None, "after": _brief(r)})
            continue
        if prev.get("command", read_meta(before)["command"]) == r["command"]:
            continue  # not rerun since
        prev = {**prev, "command": prev.get("command", read_meta(before)["command"])}
        rows.append({"spec": r["spec"], "before": _brief(prev), "after": _brief(r)})
    write_result(out, {"projects": rows, "before_file": str(before)}, command=command)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--only",
        nargs="*",
        default=None,
        help="project names to run, in this order; the other projects' rows of an "
        "existing --out are kept (each row names the command that made it)",
    )
    ap.add_argument("--n", type=int, default=10, help="tasks per project")
    ap.add_argument("--k", default="2-4", help="sites per task, or a range such as 2-4")
    ap.add_argument("--max-candidates", type=int, default=80)
    ap.add_argument("--grade-limit", type=int, default=10)
    ap.add_argument("--workers", type=int, default=1, help="make-tasks workers per project")
    ap.add_argument(
        "--project-limit",
        type=float,
        default=None,
        metavar="S",
        help="seconds a project's make-tasks may take once prepared; past it the "
        "project's row says where it stopped",
    )
    ap.add_argument("--parallel", type=int, default=1, help="projects at a time")
    ap.add_argument("--out", type=Path, default=Path("results/repos/generality.json"))
    ap.add_argument(
        "--compare",
        type=Path,
        default=None,
        metavar="BEFORE",
        help="run nothing: write --change-out, each project's row in BEFORE (an earlier "
        "results file) beside its row in --out, for the projects rerun since",
    )
    ap.add_argument("--change-out", type=Path, default=Path("results/repos/generality_change.json"))
    args = ap.parse_args()
    command = "python benchmarks/repos_generality.py " + " ".join(
        shlex.quote(a) for a in sys.argv[1:]
    )
    if args.compare is not None:
        if not args.compare.is_file() or not args.out.is_file():
            ap.error(f"--compare needs both {args.compare} and {args.out} to be results files")
        compare(args.compare, args.out, args.change_out, command)
        return
    by_name = {x[0].split("==")[0]: x for x in PROJECTS}
    unknown = sorted(set(args.only or []) - set(by_name))
    if unknown:
        ap.error(f"unknown project(s) {unknown}; known: {sorted(by_name)}")
    projects = [by_name[n] for n in args.only] if args.only else PROJECTS  # in --only's order
    if args.project_limit is not None and args.project_limit <= 0:
        ap.error(f"--project-limit {args.project_limit}: give a positive number of seconds")
    if args.workers < 1:
        ap.error(f"--workers {args.workers}: give at least 1")
    rows: dict[str, dict] = {}
    if args.out.is_file():  # keep every listed project's row until this run replaces it
        earlier = read_result(args.out)
        rows = {r["spec"]: r for r in earlier["projects"] if r["spec"] in {p[0] for p in PROJECTS}}
        for r in rows.values():
            r.setdefault("command", read_meta(args.out)["command"])
    lock = threading.Lock()
    running: dict[str, tuple[list[str], str, dict]] = {}  # spec -> (deps, case, progress)
    stopping = threading.Event()  # once set, only the stop rows are written

    def save(rec: dict, *, stop_row: bool = False) -> None:
        with lock:
            if stopping.is_set() and not stop_row:
                return  # a project thread failing as its sandboxes are killed: not its result
            rows[rec["spec"]] = rec
            done = [rows[p[0]] for p in PROJECTS if p[0] in rows]  # in the list's order
            write_result(
                args.out,
                {
                    "summary": summary(done),
                    "projects": done,
                    "settings": {
                        "n": args.n,
                        "k": args.k,
                        "max_candidates": args.max_candidates,
                        "grade_limit": args.grade_limit,
                        "workers": args.workers,
                        "project_limit_s": args.project_limit,
                    },
                },
                command=command,
            )

    def run_project(item: tuple[str, list[str], str], work: Path) -> None:
        spec, deps, why = item
        name = spec.split("==")[0]

        def log(s: str) -> None:
            print(f"[{name}] {s}", flush=True)

        def save_early(rec: dict) -> None:
            save({**rec, "case": why, "command": command})

        log(f"== {spec} ({why})")
        progress: dict = {}
        running[spec] = (deps, why, progress)
        try:
            rec = one(spec, deps, args, work, log, progress, save_early)
        except Exception as e:  # a bug of ours: keep going, say so in the result
            rec = {
                "spec": spec,
                "test_deps": deps,
                "fetched": False,
                "prepared": False,
                "tasks": 0,
                "reason": f"internal error: {e!r}",
                "traceback": traceback.format_exc()[-2000:],
            }
        rec["case"] = why
        rec["command"] = command
        log(f"-> tasks={rec['tasks']} reason={rec['reason'][:300]!r}")
        running.pop(spec, None)
        save(rec)

    class Stop(BaseException):
        """A signal asked the run to end."""

    def on_signal(signum: int, _frame) -> None:
        raise Stop(signal.Signals(signum).name)

    old = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
    tmp = tempfile.mkdtemp(prefix="vg-generality-")
    pool = ThreadPoolExecutor(max_workers=max(1, args.parallel))
    try:
        list(pool.map(lambda item: run_project(item, Path(tmp)), projects))
    except Stop as e:
        for s in old:  # a second signal while cleaning up must not cut the cleanup short
            signal.signal(s, signal.SIG_IGN)
        stopping.set()
        for spec, (deps, why, progress) in list(running.items()):
            rec = stopped_row(spec, deps, progress, f"stopped by {e}")
            save({**rec, "case": why, "command": command}, stop_row=True)
            print(f"[{spec}] {rec['stopped']}", flush=True)
        warm.stop_all()  # no sandboxed child and no vg-warm-* tree outlives the run
        shutil.rmtree(tmp, ignore_errors=True)
        os._exit(128 + int(getattr(signal, str(e))))  # worker threads are not waited for
    except BaseException:  # a bug of ours outside a project: still leave nothing running
        warm.stop_all()
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    pool.shutdown()
    shutil.rmtree(tmp, ignore_errors=True)
    print(f"summary: {summary([rows[p[0]] for p in PROJECTS if p[0] in rows])}", flush=True)


if __name__ == "__main__":
    main()
