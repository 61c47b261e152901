"""How much does hardened grading cost? v2 time per task beside raw pytest on the same tests.

    python benchmarks/repos_grading.py TASKS_DIR [--limit N] [--agent oracle] [--out PATH]

For each task the chosen baseline's workspace is graded by v2 (diff, pristine copy, sandboxed
pytest under ``python -I``, equivalence check in two sandboxed processes) and, separately, the
same test files are run by a bare ``python -m pytest`` subprocess on the same graded tree,
with the same interpreter and no sandbox: the cost of running the tests at all. Both are timed
in this process, interleaved (which one goes first alternates from task to task), so the ratio
is what hardening adds on this machine; the load average before and after is recorded beside
it. It also keeps the task-generation numbers that make-tasks saved in TASKS_DIR/index.json.
With ``--out`` the numbers are written as a results file (``verigap.results``).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

from verigap.repos import baselines
from verigap.repos.changes import apply_changes, diff_trees
from verigap.repos.graders import v2
from verigap.repos.tasks import base_tree, load_tasks, materialize_workspace, prepared_for
from verigap.results import write_result


def raw_pytest_s(p, task, ws: Path) -> float:
    """Wall time of a bare pytest run of every test file on the graded tree."""
    with tempfile.TemporaryDirectory() as tmp:
        tree = base_tree(p, task, Path(tmp) / "t", with_hidden=True)
        base = base_tree(p, task, Path(tmp) / "b", with_hidden=False)
        apply_changes(tree, diff_trees(base, ws, task.source_paths).applied)
        env = {"PATH": "/usr/bin:/bin", "PYTHONDONTWRITEBYTECODE": "1",
               "PYTHONPATH": str(tree / p.import_root) if p.import_root else str(tree)}
        t0 = time.perf_counter()
        subprocess.run([p.python, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        *p.test_files], cwd=tree, env=env, capture_output=True)
        return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("tasks", type=Path)
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--agent", default="oracle", choices=baselines.BASELINES)
    ap.add_argument("--out", type=Path, default=None,
                    help="write the numbers as a results file (e.g. results/repos/grading_X.json)")
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    tasks = load_tasks(args.tasks)[: args.limit]
    rows = []
    load_before = os.getloadavg()[0]
    for i, t in enumerate(tasks):
        p = prepared_for(t)
        with tempfile.TemporaryDirectory() as tmp:
            ws = materialize_workspace(p, t, Path(tmp) / "ws")
            for f, text in baselines.edits(args.agent, t, p).items():
                (ws / f).write_text(text)
            if i % 2 == 0:
                raw = raw_pytest_s(p, t, ws)
            t0 = time.perf_counter()
            truth = v2.evaluate(t, ws, prepared=p)
            v2_s = time.perf_counter() - t0
            if i % 2 == 1:
                raw = raw_pytest_s(p, t, ws)
        tm = truth.detail["timings"]
        rows.append({"task": t.task_id, "raw_pytest_s": round(raw, 3), "v2_s": round(v2_s, 3),
                     "v2_pytest_s": tm["pytest_s"], "v2_equivalence_s": tm["equivalence_s"],
                     "v2_copy_s": tm["prepare_copy_s"], "correct": truth.correct,
                     "tests": len(t.expected_tests), "equivalence_inputs": len(t.equivalence)})
        r = rows[-1]
        print(f"{t.task_id}: raw pytest {r['raw_pytest_s']:.2f}s | v2 {r['v2_s']:.2f}s "
              f"(pytest {r['v2_pytest_s']:.2f}, equivalence {r['v2_equivalence_s']:.2f}, "
              f"copies {r['v2_copy_s']:.2f}) | correct={r['correct']}")
    raw = [r["raw_pytest_s"] for r in rows]
    v2s = [r["v2_s"] for r in rows]
    summary = {
        "tasks": len(rows), "agent": args.agent,
        "raw_pytest_s_median": round(statistics.median(raw), 3),
        "v2_s_median": round(statistics.median(v2s), 3),
        "v2_over_raw_median": round(statistics.median(v / r for v, r in zip(v2s, raw, strict=True)), 2),
        "correct_share": sum(r["correct"] for r in rows) / len(rows),
        "loadavg": [round(load_before, 2), round(os.getloadavg()[0], 2)],
    }
    index = args.tasks / "index.json"
    if index.is_file():
        gen = json.loads(index.read_text())
        summary["generation"] = {k: gen[k] for k in (
            "source", "candidates", "valid", "rejected", "tasks", "task_rejected", "prepare_s",
            "validate_s", "tasks_s", "total_s")}
        summary["generation"]["valid_share"] = round(gen["valid"] / max(1, gen["candidates"]), 3)
    print(json.dumps(summary, indent=2))
    if args.out:
        write_result(args.out, {"summary": summary, "rows": rows},
                     command="python benchmarks/repos_grading.py " + " ".join(
                         shlex.quote(a) for a in sys.argv[1:]))


if __name__ == "__main__":
    main()
