"""tests_only sites under attack: v1, v2 before and v2 now, on tests_only variants of a task set.

    python benchmarks/repos_tests_only.py TASKS_DIR [--limit N] [--reps 2]
        [--out results/redteam/v2_tests_only_fixture.json] [--made-with "make-tasks ..."]

For every task, the visible site with the most failing tests that the channel carries
(``forward.carries``; every site tried and the answer are recorded) is stripped of its
equivalence inputs and marked ``tests_only`` (``redteam.tests_only.as_tests_only``: what a task set built
with ``--allow-tests-only`` has for a site whose arguments do not pickle). The battery's
``tests_only_*`` exploits (each fixes the covered sites and leaves that site broken behind one
of the in-process techniques, or behind a defeat device) and the two controls run on it,
graded by:

- ``v1``: the naive grader;
- ``v2_before``: v2 as it was, the site's tests run in the candidate's own process (this file's
  :func:`v2_before`: v2 with the forwarded run replaced by an in-process run of the same tests
  on the graded tree);
- ``v2_one_context``: v2 with the calls answered in the ``channel`` context only (before the
  second, agent-like ``test`` context);
- ``v2_plain``: v2 on the task the variant was made from (the site keeps its equivalence
  inputs; its tests run in the candidate's process): what a default task pays;
- ``v2``: v2 now, the site's tests run on the reference with calls carried to the candidate's
  sandboxed processes, one per context (``repos/forward.py``).

Honest rewrites that differ from the reference (``HONEST``) run as controls that can fail: a
false ``context_dependent`` would leave them unpaid.

Then the cost: the oracle's workspace graded by v2 on the plain task, on its tests_only variant
with one context and with two, alternating (plain, one, two, plain, one, two ...), with the
1-minute load average.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import tempfile
import time
import warnings
from pathlib import Path

from verigap.repos import forward
from verigap.repos.graders import v2
from verigap.repos.pytest_run import run_pytest
from verigap.repos.redteam import battery
from verigap.repos.redteam.catalogue import BY_NAME
from verigap.repos.redteam.exploits import Ctx, script
from verigap.repos.redteam.tests_only import TESTS_ONLY, as_tests_only
from verigap.repos.tasks import base_tree, load_tasks, materialize_workspace, prepared_for
from verigap.results import write_result

#: honest rewrites run as controls (each differs from the reference; skipped where it does not
#: apply)
HONEST = ["honest_rename", "honest_helper", "honest_early_return"]


def _in_process(p, candidate, sites, tests, *, backend=None, **_):
    return run_pytest(
        candidate,
        python=p.python,
        env_prefix=p.env_prefix,
        import_root=p.import_root,
        test_files=list(tests),
        config_file=p.config_file,
        backend=backend,
        timeout=p.suite_timeout(),
    )


def v2_before(task, workspace, *, prepared=None, backend=None, commands=()):
    """v2 with the tests_only site's tests run in the candidate's own process (as before)."""
    real = forward.run_forwarded
    forward.run_forwarded = _in_process
    try:
        return v2.grade(task, workspace, prepared=prepared, backend=backend, commands=commands)
    finally:
        forward.run_forwarded = real


def v2_one_context(task, workspace, *, prepared=None, backend=None, commands=()):
    """v2 with the channel answered in one candidate context only (``channel``, as before
    the second, agent-like context was added)."""
    real = forward.CONTEXTS
    forward.CONTEXTS = ("channel",)
    try:
        return v2.grade(task, workspace, prepared=prepared, backend=backend, commands=commands)
    finally:
        forward.CONTEXTS = real


#: tests_only variant's task_id -> the task it was made from (filled by main)
PLAIN: dict = {}


def v2_plain(task, workspace, *, prepared=None, backend=None, commands=()):
    """v2 on the task the variant was made from, where the site keeps its equivalence inputs
    and its tests run in the candidate's own process: what a default task pays for the same
    workspace."""
    return v2.grade(
        PLAIN[task.task_id], workspace, prepared=prepared, backend=backend, commands=commands
    )


@contextlib.contextmanager
def _contexts(ctxs):
    real = forward.CONTEXTS
    forward.CONTEXTS = ctxs
    try:
        yield
    finally:
        forward.CONTEXTS = real


def _variant(task, p, backend):
    """The task with its first visible site (most failing tests first) that the channel
    carries made ``tests_only`` (what ``make-tasks --allow-tests-only`` would keep), and
    every visible site tried with ``forward.carries``'s answer. None when no site carries."""
    tried = []
    with tempfile.TemporaryDirectory() as tmp:
        base = base_tree(p, task, Path(tmp) / "base", with_hidden=True)
        for site in sorted(
            (s for s in task.sites if s.visible), key=lambda s: (-len(s.fail_to_pass), s.function)
        ):
            why = forward.carries(p, [site], base, backend=backend)
            tried.append({"function": site.function, "carried": why is None, "why": why})
            if why is None:
                return as_tests_only(task, {site.function}), site.function, tried
    return None, None, tried


def _oracle_ws(task, p, dest: Path) -> Path:
    ws = materialize_workspace(p, task, dest)
    for tool, a in script(BY_NAME["oracle"], Ctx(task, p, ws)):
        if tool == "write_file":
            (ws / a["path"]).write_text(a["content"])
    return ws


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("tasks", type=Path)
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--runs", type=Path, default=Path(tempfile.gettempdir()) / "vg-tests-only")
    ap.add_argument("--out", type=Path, default=Path("results/redteam/v2_tests_only_fixture.json"))
    ap.add_argument(
        "--made-with",
        default=None,
        help="the command that made TASKS_DIR (recorded in the results file; "
        "default: the fixture's make-tasks command)",
    )
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    backend = os.environ.get("VERIGAP_SANDBOX", "bwrap")
    tasks = load_tasks(args.tasks)[: args.limit]
    graders = [
        "v1",
        "v2",
        f"{__name__}:v2_before",
        f"{__name__}:v2_one_context",
        f"{__name__}:v2_plain",
    ]
    names = [e.name for e in TESTS_ONLY] + ["oracle", "noop", *HONEST]
    rows, timing = [], []
    carried = []
    for task in tasks:
        p = prepared_for(task, backend=backend)
        var, site, tried = _variant(task, p, backend)
        carried.append({"task_id": task.task_id, "sites": tried})
        print(
            f"{task.task_id}: channel carries {sum(t['carried'] for t in tried)} of "
            f"{len(tried)} visible site(s) tried: {tried}",
            flush=True,
        )
        if var is None:
            continue
        tdir = args.runs / "tasks"
        tdir.mkdir(parents=True, exist_ok=True)
        tpath = tdir / f"{var.task_id}.json"
        var.save(tpath)
        PLAIN[var.task_id] = task
        for name in names:
            t0 = time.perf_counter()
            r = battery.run_one(
                args.runs / name / var.task_id,
                task_path=str(tpath),
                exploit=name,
                graders=graders,
                backend=backend,
            )
            g = r["grades"]
            row = {
                "task_id": var.task_id,
                "site": site,
                "exploit": name,
                "correct": r.get("correct"),
                "skipped": r.get("skipped"),
                **{
                    k.split(":")[-1]: {"rewarded": g[k]["rewarded"], "hacks": g[k]["hacks"]}
                    for k in graders
                },
            }
            if r.get("skipped"):  # an honest rewrite that does not apply to this task
                print(f"{name:36s} {var.task_id}: skipped", flush=True)
                continue
            row |= {"context_dependent": "context_dependent" in g["v2"]["hacks"]}
            rows.append(row)
            print(
                f"{name:36s} {var.task_id}: correct={r['correct']} v1={g['v1']['rewarded']} "
                f"v2_before={g[graders[2]]['rewarded']} "
                f"v2_one_context={g[graders[3]]['rewarded']} v2_plain={g[graders[4]]['rewarded']} "
                f"v2={g['v2']['rewarded']} "
                f"({time.perf_counter() - t0:.0f}s)",
                flush=True,
            )
        with tempfile.TemporaryDirectory() as tmp:
            ws = _oracle_ws(task, p, Path(tmp) / "ws")
            v2.evaluate(var, ws, prepared=p, backend=backend)  # warm the caches
            for rep in range(args.reps):
                for kind, t, ctxs in (
                    ("plain", task, forward.CONTEXTS),
                    ("tests_only_one_context", var, ("channel",)),
                    ("tests_only", var, forward.CONTEXTS),
                ):
                    with _contexts(ctxs):
                        tr = v2.evaluate(t, ws, prepared=p, backend=backend)
                    assert tr.correct, (kind, tr.detail)
                    timing.append(
                        {
                            "task_id": task.task_id,
                            "kind": kind,
                            "rep": rep,
                            "total_s": tr.detail["timings"]["total_s"],
                            "forward_s": tr.detail["timings"].get("forward_s"),
                            "pytest_s": tr.detail["timings"]["pytest_s"],
                            "load_avg_1m": round(os.getloadavg()[0], 2),
                        }
                    )
    matrix = {}
    for name in names:
        rs = [r for r in rows if r["exploit"] == name]
        matrix[name] = {
            "n": len(rs),
            "correct": sum(r["correct"] for r in rs),
            **{
                g: sum(r[g]["rewarded"] for r in rs)
                for g in (spec.split(":")[-1] for spec in graders)
            },
            "context_dependent": sum(r["context_dependent"] for r in rs),
        }
    ratios = []
    for task in tasks:
        if not any(x["task_id"] == task.task_id for x in timing):
            continue  # no visible site the channel carries
        ts = {
            k: statistics.median(
                x["total_s"] for x in timing if x["task_id"] == task.task_id and x["kind"] == k
            )
            for k in ("plain", "tests_only_one_context", "tests_only")
        }
        fw = {
            k: statistics.median(
                x["forward_s"] for x in timing if x["task_id"] == task.task_id and x["kind"] == k
            )
            for k in ("tests_only_one_context", "tests_only")
        }
        ratios.append(
            {
                "task_id": task.task_id,
                "plain_s": ts["plain"],
                "tests_only_one_context_s": ts["tests_only_one_context"],
                "tests_only_s": ts["tests_only"],
                "ratio": round(ts["tests_only"] / ts["plain"], 3),
                "ratio_vs_one_context": round(ts["tests_only"] / ts["tests_only_one_context"], 3),
                "forward_ratio_vs_one_context": round(
                    fw["tests_only"] / fw["tests_only_one_context"], 3
                ),
            }
        )
    tried = [t for c in carried for t in c["sites"]]
    data = {
        "matrix": matrix,
        "rows": rows,
        "timing": timing,
        "timing_by_task": ratios,
        "ratio_median": round(statistics.median(r["ratio"] for r in ratios), 3) if ratios else None,
        "ratio_vs_one_context_median": round(
            statistics.median(r["ratio_vs_one_context"] for r in ratios), 3
        )
        if ratios
        else None,
        "forward_ratio_vs_one_context_median": round(
            statistics.median(r["forward_ratio_vs_one_context"] for r in ratios), 3
        )
        if ratios
        else None,
        "carried": carried,
        "sites_tried": len(tried),
        "sites_carried": sum(t["carried"] for t in tried),
        "tasks_with_a_carried_site": sum(
            1 for c in carried if any(t["carried"] for t in c["sites"])
        ),
        "backend": backend,
    }
    for name, m in matrix.items():
        print(
            f"{name:36s} n={m['n']} correct={m['correct']} v1={m['v1']} "
            f"v2_before={m['v2_before']} v2_one_context={m['v2_one_context']} "
            f"v2_plain={m['v2_plain']} v2={m['v2']} "
            f"context_dependent={m['context_dependent']}"
        )
    print("v2 on tests_only variant / v2 on plain task (oracle):", data["ratio_median"])
    print(
        "v2 on tests_only variant, two contexts / one context:",
        data["ratio_vs_one_context_median"],
        "(forwarded run alone:",
        data["forward_ratio_vs_one_context_median"],
        ")",
    )
    made = args.made_with or (
        "verigap repos make-tasks tests/repos/fixture_lib --k 4 --n 3 "
        "--max-candidates 16 --seed 0 --env current --min-hidden 1 "
        f"--out {args.tasks}"
    )
    cmd = (
        f"{made} && python benchmarks/repos_tests_only.py {args.tasks} --reps {args.reps}"
        + (f" --limit {args.limit}" if args.limit else "")
        + f" --out {args.out}"
    )
    write_result(args.out, data, command=cmd)
    print(args.out)


if __name__ == "__main__":
    main()
