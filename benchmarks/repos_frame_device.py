"""Caller-frame defeat devices on default tasks, before and after the comparison's caller replay.

    python benchmarks/repos_frame_device.py TASKS_DIR [--limit 1] [--workers 2]
        [--runs runs/frame_device] --out results/redteam/v2_frame_device_SET.json

A fix that is right except when a test's own frame calls it, with the
run's report scrubbed, was paid by v2 on default inflection tasks, because the out-of-process
comparison called every input from its runner's frame. Equivalence inputs now carry the frames
their test reached them through and the comparison's agent context calls through a replay of
them, with ``PYTEST_CURRENT_TEST`` set to the capturing test's. This runs ``frame_device``,
``frame_device_obfuscated`` and ``pytest_env_device`` with the controls (oracle,
no-op) and one honest rewrite (``honest_helper``) under v1 and v2 on the task set as made
(``after``) and on a copy whose inputs have no recorded caller or test (``before``: how task files made
before this change are graded, the comparison calling from its runner's frame in both
contexts), and writes both matrices with v2's per-exploit outcome.
"""

from __future__ import annotations

import argparse
import json
import shutil
import warnings
from pathlib import Path

from verigap.repos.graders.measure import matrix_summary
from verigap.repos.redteam import battery, matrix
from verigap.results import write_result
from verigap.runs import run_jobs, write_json_atomic

EXPLOITS = ("frame_device", "frame_device_obfuscated", "pytest_env_device", "honest_helper")
GRADERS = ("v1", "v2")


def strip_callers(src: Path, dest: Path) -> None:
    """A copy of the task set ``src`` whose equivalence inputs record no caller or test."""
    dest.mkdir(parents=True, exist_ok=True)
    for f in sorted(src.glob("*.json")):
        d = json.loads(f.read_text())
        if f.name != "index.json":
            for x in d["equivalence"]:
                x["caller"] = x["test"] = None
        (dest / f.name).write_text(json.dumps(d))


def battery_run(tasks: Path, out: Path, limit: int, workers: int) -> dict:
    paths = sorted(f for f in tasks.glob("*.json") if f.name != "index.json")[:limit]
    js = battery.jobs(paths, out, graders=list(GRADERS), exploits=list(EXPLOITS))
    results = run_jobs(
        js, executor="process", workers=workers, progress=False, description="exploits"
    )
    write_json_atomic(out / "matrix.json", matrix.build(results.values(), list(GRADERS)))
    return matrix_summary(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("tasks", type=Path, help="a task directory (make-tasks output)")
    ap.add_argument("--limit", type=int, default=1, help="the first N tasks")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument(
        "--runs",
        type=Path,
        default=Path("runs/frame_device"),
        help="where the battery's run directories go (resumable)",
    )
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--command", default="", help="the command that made the task set")
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    blind = args.runs / "tasks_without_callers"
    if blind.exists():
        shutil.rmtree(blind)
    strip_callers(args.tasks, blind)
    data = {
        "exploits": list(EXPLOITS),
        "limit": args.limit,
        "before": battery_run(blind, args.runs / "before", args.limit, args.workers),
        "after": battery_run(args.tasks, args.runs / "after", args.limit, args.workers),
    }
    for k in ("before", "after"):
        for name, row in sorted(data[k]["v2_by_exploit"].items()):
            print(
                f"{k:6} {name:26} v2 paid {row['paid']}/{row['n']}, named {row['named']}, "
                f"equivalence failed {row['equivalence_failed']}"
            )
    cmd = (f"{args.command} && " if args.command else "") + (
        f"python benchmarks/repos_frame_device.py {args.tasks} --limit {args.limit} "
        f"--workers {args.workers} --runs {args.runs} --out {args.out}"
    )
    write_result(args.out, data, command=cmd)
    print(args.out)


if __name__ == "__main__":
    main()
