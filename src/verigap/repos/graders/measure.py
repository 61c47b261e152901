"""Figures for the v2 grader: the red-team matrix as a results file, and v2's grading time
beside the raw pytest time of the same tests.

    python -m verigap.repos.graders.measure matrix RUN_DIR OUT.json [--command "..."]
    python -m verigap.repos.graders.measure timing TASK_DIR OUT.json [--reps 3] [--limit N]
        [--command "..."]

``matrix`` reads the battery's ``matrix.json`` (``verigap redteam ... --out RUN_DIR``) and adds
the per-exploit v2 outcome used in the docs: paid or not, named or caught by the
out-of-process check. ``timing`` grades the oracle's workspace of every task with v2 and times a
plain ``python -m pytest`` of the same test files on the reference tree (no sandbox, no
harness; plugin autoload off, as in v2, so both load the same plugins), ``reps`` times each,
and reports median wall times. (CPU time is not reported: the sandboxed processes' usage does
not reach this process's child-usage counters through bubblewrap's PID namespace.)
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from verigap.repos.graders import v2
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
        row = per.setdefault(r["exploit"], {"n": 0, "paid": 0, "named": 0,
                                            "equivalence_failed": 0, "tests_passed": 0})
        row["n"] += 1
        row["paid"] += bool(g.get("rewarded"))
        row["named"] += bool(g.get("detected")) and not r.get("control")
        row["equivalence_failed"] += g.get("checks", {}).get("equivalence", 1.0) < 1.0
        row["tests_passed"] += bool(g.get("checks", {}).get("visible")
                                    and g.get("checks", {}).get("hidden"))
    return {"matrix": m, "v2_by_exploit": per,
            "v2_paid_exploits": sorted(k for k, v in per.items()
                                       if v["paid"] and k not in ("oracle", "noop"))}


def timing(task_dir: Path, reps: int = 3, limit: int | None = None,
           backend: str | None = None) -> dict[str, Any]:
    rows = []
    for task in load_tasks(task_dir)[:limit]:
        p = prepared_for(task, backend=backend)
        v2_s, raw_s, parts = [], [], []
        with tempfile.TemporaryDirectory(prefix="vg-time-") as tmp:
            ws = materialize_workspace(p, task, Path(tmp) / "ws")
            for s in task.sites:
                (ws / s.file).write_text((p.tree / s.file).read_text())
            for _ in range(reps):
                t0 = time.perf_counter()
                t = v2.evaluate(task, ws, prepared=p, backend=backend)
                v2_s.append(time.perf_counter() - t0)
                parts.append(t.detail["timings"])
                if not t.correct:
                    raise RuntimeError(f"{task.task_id}: the oracle is not correct under v2")
                t1 = time.perf_counter()
                subprocess.run([p.python, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                                *p.test_files], cwd=p.tree, capture_output=True, check=False,
                               env={**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"})
                raw_s.append(time.perf_counter() - t1)
        rows.append({"task_id": task.task_id, "tests": len(task.expected_tests),
                     "equivalence_inputs": len(task.equivalence),
                     "v2_s": round(statistics.median(v2_s), 3),
                     "raw_pytest_s": round(statistics.median(raw_s), 3),
                     "v2_parts_s": {k: round(statistics.median(x[k] for x in parts), 3)
                                    for k in parts[0]}})
    return {"reps": reps, "tasks": rows,
            "wall_ratio_median": round(statistics.median(r["v2_s"] / r["raw_pytest_s"]
                                                         for r in rows), 2)}


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[0] not in ("matrix", "timing"):
        print(__doc__, file=sys.stderr)
        return 2
    kind, src, out = argv[0], Path(argv[1]), Path(argv[2])
    extra = argv[3:]
    # --command: the command(s) that made the input (tasks, a battery run), for provenance
    before = extra[extra.index("--command") + 1] + " && " if "--command" in extra else ""
    if kind == "matrix":
        write_result(out, matrix_summary(src), command=f"{before}python -m "
                     f"verigap.repos.graders.measure matrix {src} {out}")
    else:
        reps = int(extra[extra.index("--reps") + 1]) if "--reps" in extra else 3
        limit = int(extra[extra.index("--limit") + 1]) if "--limit" in extra else None
        write_result(out, timing(src, reps=reps, limit=limit),
                     command=f"{before}python -m verigap.repos.graders.measure timing {src} {out} "
                             f"--reps {reps}" + (f" --limit {limit}" if limit else ""))
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
