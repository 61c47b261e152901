"""Figures for the v2 grader: the red-team matrix as a results file, and v2's grading time
beside the raw pytest time of the same tests.

    python -m verigap.repos.graders.measure matrix RUN_DIR OUT.json [--command "..."]
    python -m verigap.repos.graders.measure timing TASK_DIR [TASK_DIR ...] OUT.json [--reps 3]
        [--limit N] [--command "..."]

``matrix`` reads the battery's ``matrix.json`` (``verigap redteam ... --out RUN_DIR``) and adds
the per-exploit v2 outcome used in the docs: paid or not, named or caught by the
out-of-process check. ``timing`` grades the oracle's workspace of every task with v2 and times a
plain ``python -m pytest`` of the same test files on the tree v2 grades (no sandbox, no
harness; plugin autoload off and the same ``-p`` plugins as v2), alternating the two ``reps``
times, and reports median wall times and the load average. (CPU time is not reported: the sandboxed processes' usage does
not reach this process's child-usage counters through bubblewrap's PID namespace.)
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from verigap.repos import baselines
from verigap.repos.changes import apply_changes, diff_trees
from verigap.repos.graders import v2
from verigap.repos.pytest_run import suite_options
from verigap.repos.tasks import load_tasks, materialize_workspace, prepared_for
from verigap.results import write_result
from verigap.runs import read_json


def matrix_summary(run_dir: Path) -> dict[str, Any]:
    """The battery's matrix plus, per exploit, how v2 answered it on every task."""
    m = read_json(run_dir / "matrix.json")
    per: dict[str, dict[str, Any]] = {}
    for res in sorted(run_dir.glob("*/*/result.json")):
        r = read_json(res)
        g = r.get("grades", {}).get("v2")
        if not g or r.get("skipped"):
            continue
        row = per.setdefault(
            r["exploit"],
            {
                "n": 0,
                "paid": 0,
                "paid_wrong": 0,
                "correct": 0,
                "named": 0,
                "equivalence_failed": 0,
                "tests_passed": 0,
                "plain_wrong": 0,
                "paid_plain_wrong": 0,
            },
        )
        row["n"] += 1
        row["paid"] += bool(g.get("rewarded"))
        row["correct"] += bool(r.get("correct"))
        row["paid_wrong"] += bool(g.get("rewarded")) and not r.get("correct")
        row["named"] += bool(g.get("detected")) and not r.get("control")
        row["equivalence_failed"] += g.get("checks", {}).get("equivalence", 1.0) < 1.0
        row["tests_passed"] += bool(
            g.get("checks", {}).get("visible") and g.get("checks", {}).get("hidden")
        )
        # the independent truth (every site called in plain python), where it was measured
        row["plain_wrong"] += r.get("plain_correct") is False
        row["paid_plain_wrong"] += bool(g.get("rewarded")) and r.get("plain_correct") is False
    ran = [r for r in m["rows"] if not r["control"] and r.get("n", 0) > 0]
    return {
        "matrix": m,
        "v2_by_exploit": per,
        # paid on a workspace the truth judges wrong: what v2 must never do
        "v2_paid_exploits": sorted(
            k for k, v in per.items() if v["paid_wrong"] and k not in ("oracle", "noop")
        ),
        # an exploit whose workspace is right on a task (a device whose guard never fires
        # there is the reference's code): paid, and rightly so
        "real_fixes": sorted(
            k for k, v in per.items() if v["correct"] and k not in ("oracle", "noop")
        ),
        # counts the docs quote: exploits that ran, and how many each grader paid
        "exploits_ran": len(ran),
        "paid_count": {g: len(v) for g, v in m["rewarded_exploits"].items()},
    }


def raw_pytest(p, tree: Path, timeout: float) -> float:
    """Wall time of a bare ``python -m pytest`` of every test file on ``tree``: the same
    interpreter, plugin set (autoload off, the declared plugins by ``-p``) and addopts handling
    as v2's run, but no sandbox, no harness, no copies and no comparison."""
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": str(tree),
        "LANG": "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONHASHSEED": "0",
        "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
        "PYTHONPATH": str(tree / p.import_root) if p.import_root not in ("", ".") else str(tree),
    }
    cmd = [
        p.python,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        *p.test_files,
        *suite_options(tree, p.config_file, Path(p.env_prefix)),
    ]
    t0 = time.perf_counter()
    # a session of its own, as every sandboxed command gets: with the kernel's autogroup
    # scheduling, a loaded machine gives each session its own share of the CPUs
    subprocess.run(
        cmd,
        cwd=tree,
        env=env,
        capture_output=True,
        check=False,
        timeout=timeout,
        start_new_session=True,
    )
    return time.perf_counter() - t0


def timing(
    task_dirs: list[Path],
    reps: int = 3,
    limit: int | None = None,
    backend: str | None = None,
    agent: str = "oracle",
) -> dict[str, Any]:
    """v2's wall time per grading beside a bare pytest run of the same tests on the same tree,
    measured in alternation (raw, v2, v2 serial, raw, ...) so that load on a shared machine hits
    them alike; the load average is recorded around every round. ``v2`` starts its sandboxes
    side by side (how it grades); ``v2 serial`` one after another, the cost without that
    overlap (on a machine whose cores are all busy, side-by-side processes also take a larger
    share of them, so both are reported). The first grading of each task is
    timed apart (``first_v2_s``): it builds the task's cached base and reference answers."""
    sets = []
    for task_dir in task_dirs:
        rows = []
        for task in load_tasks(task_dir)[:limit]:
            p = prepared_for(task, backend=backend)
            v2_s, serial_s, raw_s, parts, loads = [], [], [], [], []
            with tempfile.TemporaryDirectory(prefix="vg-time-") as tmp:
                ws = materialize_workspace(p, task, Path(tmp) / "ws")
                for f, text in baselines.edits(agent, task, p).items():
                    (ws / f).write_text(text)
                # the tree v2 grades: the base with hidden tests plus the agent's change
                tree = Path(tmp) / "tree"
                shutil.copytree(v2.pristine_base(p, task, with_hidden=True), tree)
                apply_changes(
                    tree,
                    diff_trees(
                        v2.pristine_base(p, task, with_hidden=False), ws, task.source_paths
                    ).applied,
                )
                t0 = time.perf_counter()
                first = v2.evaluate(task, ws, prepared=p, backend=backend)
                first_s = time.perf_counter() - t0
                for _ in range(reps):
                    load0 = os.getloadavg()[0]
                    raw_s.append(raw_pytest(p, tree, p.suite_timeout()))
                    t0 = time.perf_counter()
                    t = v2.evaluate(task, ws, prepared=p, backend=backend)
                    v2_s.append(time.perf_counter() - t0)
                    parts.append(t.detail["timings"])
                    t0 = time.perf_counter()
                    u = v2.evaluate(task, ws, prepared=p, backend=backend, parallel=False)
                    serial_s.append(time.perf_counter() - t0)
                    loads.append(round((load0 + os.getloadavg()[0]) / 2, 2))
                    if t.correct != first.correct or u.correct != first.correct:
                        raise RuntimeError(f"{task.task_id}: v2 changed its verdict between runs")
            rows.append(
                {
                    "task_id": task.task_id,
                    "tests": len(task.expected_tests),
                    "equivalence_inputs": len(task.equivalence),
                    "correct": first.correct,
                    "first_v2_s": round(first_s, 3),
                    "v2_s": round(statistics.median(v2_s), 3),
                    "v2_serial_s": round(statistics.median(serial_s), 3),
                    "raw_pytest_s": round(statistics.median(raw_s), 3),
                    "ratio": round(statistics.median(v2_s) / statistics.median(raw_s), 2),
                    "ratio_serial": round(
                        statistics.median(serial_s) / statistics.median(raw_s), 2
                    ),
                    "v2_parts_s": {
                        k: round(statistics.median(x[k] for x in parts), 3) for k in parts[0]
                    },
                    "load_avg_1m": loads,
                }
            )
        ratios = [r["ratio"] for r in rows]
        serial = [r["ratio_serial"] for r in rows]
        med = {
            f"{k}_median": round(statistics.median(r[k] for r in rows), 3) if rows else None
            for k in ("raw_pytest_s", "v2_s", "v2_serial_s", "first_v2_s")
        }
        spec = load_tasks(task_dir)[0].source.spec if rows else ""
        sets.append(
            {
                "tasks_dir": task_dir.name,
                "source": Path(spec).name if "/" in spec else spec,
                "n_tasks": len(rows),
                **med,
                "tasks": rows,
                "wall_ratio_median": round(statistics.median(ratios), 2) if rows else None,
                "serial_ratio_median": round(statistics.median(serial), 2) if rows else None,
                "wall_ratio_pooled": round(
                    sum(r["v2_s"] for r in rows) / sum(r["raw_pytest_s"] for r in rows), 2
                )
                if rows
                else None,
            }
        )
    return {
        "reps": reps,
        "agent": agent,
        "cpus": os.cpu_count(),
        "sets": sets,
        "load_avg_1m_mean": round(
            statistics.mean(x for s in sets for r in s["tasks"] for x in r["load_avg_1m"]), 2
        ),
    }


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[0] not in ("matrix", "timing"):
        print(__doc__, file=sys.stderr)
        return 2
    kind, *rest = argv
    opts = {}
    while len(rest) >= 2 and rest[-2].startswith("--"):
        opts[rest[-2]] = rest[-1]
        rest = rest[:-2]
    *srcs, out_s = rest
    out = Path(out_s)
    # --command: the command(s) that made the input (tasks, a battery run), for provenance
    before = opts["--command"] + " && " if "--command" in opts else ""
    if kind == "matrix":
        write_result(
            out,
            matrix_summary(Path(srcs[0])),
            command=f"{before}python -m verigap.repos.graders.measure matrix {srcs[0]} {out}",
        )
    else:
        reps = int(opts.get("--reps", 3))
        limit = int(opts["--limit"]) if "--limit" in opts else None
        write_result(
            out,
            timing([Path(x) for x in srcs], reps=reps, limit=limit),
            command=f"{before}python -m verigap.repos.graders.measure timing "
            f"{' '.join(srcs)} {out} --reps {reps}" + (f" --limit {limit}" if limit else ""),
        )
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
