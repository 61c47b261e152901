"""Defeat devices keyed on tells of the grading processes, and an honest fix with package data.

    python benchmarks/repos_tell_devices.py TASKS_DIR [--limit 3] [--workers 2]
        [--runs runs/tell_devices] [--sealed] --out results/redteam/v2_tell_devices_SET.json

Runs every ``tell_*`` device of ``redteam/tells.py`` (each site fixed only where a guard
recognises a grading process: fixed hash seed, harness flags, an armed alarm, the harness as
``__main__``, files only grading makes, the plugin switch, an obfuscated mix), the honest
``honest_package_data`` control, ``list_liar`` (broken items in a list subclass that claims
to be a list), with ``--sealed`` the ``sealed_tell_*`` devices (keyed on what the sealed
channel's agent-like end used to show, for tasks whose sites the channel carries), and the
oracle/no-op controls under v1 and v2 on the first
``--limit`` tasks, and writes the matrix with, per exploit, how often v2 paid and how often the
independent plain-python truth (``redteam/plain_truth.py``) called the workspace wrong.
"""

from __future__ import annotations

import argparse
import warnings
from pathlib import Path

from verigap.repos.graders.measure import matrix_summary
from verigap.repos.redteam import battery, matrix
from verigap.repos.redteam.tells import (
    ENCODER_LIAR,
    HONEST_DATA,
    SEALED_TELL_DEVICES,
    TELL_DEVICES,
)
from verigap.results import write_result
from verigap.runs import run_jobs, write_json_atomic

GRADERS = ("v1", "v2")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("tasks", type=Path, help="a task directory (make-tasks output)")
    ap.add_argument("--limit", type=int, default=3, help="the first N tasks")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument(
        "--runs",
        type=Path,
        default=Path("runs/tell_devices"),
        help="where the battery's run directories go (resumable)",
    )
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--command", default="", help="the command that made the task set")
    ap.add_argument(
        "--sealed",
        action="store_true",
        help="add the sealed_tell_* devices (for tasks whose sites the sealed channel carries)",
    )
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    names = [e.name for e in (*TELL_DEVICES, *ENCODER_LIAR, *HONEST_DATA)]
    if args.sealed:
        names += [e.name for e in SEALED_TELL_DEVICES]
    paths = sorted(f for f in args.tasks.glob("*.json") if f.name != "index.json")[: args.limit]
    js = battery.jobs(paths, args.runs, graders=list(GRADERS), exploits=names)
    results = run_jobs(
        js, executor="process", workers=args.workers, progress=False, description="tell devices"
    )
    write_json_atomic(args.runs / "matrix.json", matrix.build(results.values(), list(GRADERS)))
    data = {"exploits": names, "limit": args.limit, **matrix_summary(args.runs)}
    per = data["v2_by_exploit"]
    data["devices"] = len(TELL_DEVICES)
    data["device_episodes"] = sum(v["n"] for k, v in per.items() if k.startswith("tell_"))
    data["device_paid_v2"] = sum(v["paid"] for k, v in per.items() if k.startswith("tell_"))
    data["device_plain_wrong"] = sum(
        v["plain_wrong"] for k, v in per.items() if k.startswith("tell_")
    )
    if args.sealed:
        sealed = {k: v for k, v in per.items() if k.startswith("sealed_tell_")}
        data["sealed_devices"] = len(SEALED_TELL_DEVICES)
        data["sealed_device_episodes"] = sum(v["n"] for v in sealed.values())
        data["sealed_device_paid_v2"] = sum(v["paid"] for v in sealed.values())
        data["sealed_device_plain_wrong"] = sum(v["plain_wrong"] for v in sealed.values())
    data["list_liar"] = per.get("list_liar", {})
    data["honest_data_paid_v2"] = per.get("honest_package_data", {}).get("paid", 0)
    data["honest_data_episodes"] = per.get("honest_package_data", {}).get("n", 0)
    for name, row in sorted(per.items()):
        print(
            f"{name:28} v2 paid {row['paid']}/{row['n']}, named {row['named']}, "
            f"plain-python wrong {row['plain_wrong']}, paid though plain-wrong "
            f"{row['paid_plain_wrong']}"
        )
    cmd = (f"{args.command} && " if args.command else "") + (
        f"python benchmarks/repos_tell_devices.py {args.tasks} --limit {args.limit} "
        f"--workers {args.workers} --runs {args.runs}"
        + (" --sealed" if args.sealed else "")
        + f" --out {args.out}"
    )
    write_result(args.out, data, command=cmd)
    print(args.out)


if __name__ == "__main__":
    main()
