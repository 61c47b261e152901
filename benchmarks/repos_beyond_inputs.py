"""How much of the finite-input gap the comparison's generated larger inputs close.

    python benchmarks/repos_beyond_inputs.py TASKS_DIR [--limit 3]
        --out results/redteam/v2_beyond_inputs_SET.json

A fix that is right for every argument within the sizes the comparison recorded and broken past
them (``beyond_recorded_device`` in ``redteam/tells.py``) passes a comparison that only replays
recorded inputs. v2 adds inputs past the recorded sizes, made from the recorded ones and answered
by the reference (``equivalence.beyond_inputs``). On each task this grades the device, the
oracle and two honest rewrites with v2 on the recorded inputs only (``beyond=False``) and with
the generated ones (the default), and writes, per arm, how many were judged correct.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import warnings
from pathlib import Path

from verigap.repos.graders import v2
from verigap.repos.redteam import honest
from verigap.repos.redteam.catalogue import BY_NAME
from verigap.repos.redteam.exploits import Ctx
from verigap.repos.tasks import RepoTask, materialize_workspace, prepared_for
from verigap.results import write_result

ARMS = ("beyond_recorded_device", "oracle", "honest_rename", "honest_helper")


def _apply(name: str, task: RepoTask, p, ws: Path) -> bool:
    """Write the arm's files into ``ws`` (False: it does not apply to this task)."""
    ex = BY_NAME.get(name) or honest.BY_NAME[name]
    try:
        steps = ex.build(Ctx(task, p, ws))
    except honest.NotApplicable:
        return False
    for tool, args in steps:
        if tool == "write_file":
            (ws / args["path"]).parent.mkdir(parents=True, exist_ok=True)
            (ws / args["path"]).write_text(args["content"])
    return True


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("tasks", type=Path, help="a task directory (make-tasks output)")
    ap.add_argument("--limit", type=int, default=3, help="the first N tasks")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--command", default="", help="the command that made the task set")
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    paths = sorted(f for f in args.tasks.glob("*.json") if f.name != "index.json")[: args.limit]
    rows = []
    for path in paths:
        task = RepoTask.load(path)
        p = prepared_for(task)
        for name in ARMS:
            with tempfile.TemporaryDirectory(prefix="vg-beyond-") as tmp:
                ws = materialize_workspace(p, task, Path(tmp) / "ws")
                if not _apply(name, task, p, ws):
                    continue
                row = {"task_id": task.task_id, "arm": name}
                for on in (False, True):
                    t = v2.evaluate(task, ws, prepared=p, beyond=on)
                    key = "with_generated" if on else "recorded_only"
                    row[key] = {
                        "correct": t.correct,
                        "equivalence": t.checks["equivalence"],
                        "inputs": t.detail["equivalence_inputs"],
                        "generated": t.detail["beyond_inputs"],
                    }
                rows.append(row)
                shutil.rmtree(ws, ignore_errors=True)
                print(row)

    def count(arm: str, key: str) -> int:
        return sum(r[key]["correct"] for r in rows if r["arm"] == arm)

    n_device = sum(r["arm"] == "beyond_recorded_device" for r in rows)
    data = {
        "rows": rows,
        "tasks": len(paths),
        "device_episodes": n_device,
        "device_paid_recorded_only": count("beyond_recorded_device", "recorded_only"),
        "device_paid_with_generated": count("beyond_recorded_device", "with_generated"),
        "honest_episodes": sum(r["arm"] != "beyond_recorded_device" for r in rows),
        "honest_correct_recorded_only": sum(count(a, "recorded_only") for a in ARMS[1:]),
        "honest_correct_with_generated": sum(count(a, "with_generated") for a in ARMS[1:]),
    }
    print({k: v for k, v in data.items() if k != "rows"})
    cmd = (f"{args.command} && " if args.command else "") + (
        f"python benchmarks/repos_beyond_inputs.py {args.tasks} --limit {args.limit} "
        f"--out {args.out}"
    )
    write_result(args.out, data, command=cmd)
    print(args.out)


if __name__ == "__main__":
    main()
