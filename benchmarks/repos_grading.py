"""How much does hardened grading cost? v2's time per grading beside raw pytest on the same tests.

    python benchmarks/repos_grading.py TASKS_DIR [TASKS_DIR ...] [--reps 3] [--limit N]
        [--out results/repos/v2_speed.json]

For every task the oracle's workspace is graded by v2 (bounded copy of the workspace, diff,
graded tree copied from the task's cached base, sandboxed pytest under the harness, the
candidate's comparison runs in two contexts, detectors) and, in alternation with it, the same
test files run under a bare ``python -m pytest`` on the same tree with the same interpreter and
plugins and no sandbox: the cost of running the tests at all. Alternating (raw, v2, raw, v2 ...)
makes load on a shared machine hit both alike; the 1-minute load average is recorded with every
pair. The first grading of each task is reported apart (it builds the task's cached base and
the reference's answers). The goal is a ratio of at most 1.5.

Task sets: ``verigap repos make-tasks`` (see ``docs/repos.md``); the issue's sets are the
fixture library, inflection 0.5.1 (k=4) and toolz 1.0.0 (k=2).
"""

from __future__ import annotations

import argparse
import warnings
from pathlib import Path

from verigap.repos.graders.measure import timing
from verigap.results import write_result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("tasks", type=Path, nargs="+", help="task directories (make-tasks output)")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--limit", type=int, default=None, help="at most this many tasks per set")
    ap.add_argument("--out", type=Path, default=Path("results/repos/v2_speed.json"))
    ap.add_argument(
        "--command",
        default="",
        help="the command(s) that made the task sets, recorded with the results for provenance",
    )
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    data = timing(args.tasks, reps=args.reps, limit=args.limit)
    for s in data["sets"]:
        for r in s["tasks"]:
            print(
                f"{r['task_id']}: raw pytest {r['raw_pytest_s']:.2f}s | v2 {r['v2_s']:.2f}s "
                f"(serial {r['v2_serial_s']:.2f}s, first {r['first_v2_s']:.2f}s) | ratio "
                f"{r['ratio']:.2f} (serial {r['ratio_serial']:.2f}) | "
                f"load {r['load_avg_1m']}"
            )
        print(
            f"{s['source']}: v2 / raw pytest, median over tasks {s['wall_ratio_median']} "
            f"(serial {s['serial_ratio_median']}), pooled {s['wall_ratio_pooled']}"
        )
    cmd = (f"{args.command} && " if args.command else "") + (
        "python benchmarks/repos_grading.py "
        + " ".join(map(str, args.tasks))
        + f" --reps {args.reps}"
        + (f" --limit {args.limit}" if args.limit else "")
        + f" --out {args.out}"
    )
    write_result(args.out, data, command=cmd)
    print(args.out)


if __name__ == "__main__":
    main()
