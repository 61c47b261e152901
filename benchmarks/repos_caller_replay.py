"""What does the caller replay cost? v2 on the same task with and without recorded callers.

    python benchmarks/repos_caller_replay.py TASKS_DIR [TASKS_DIR ...] [--reps 5] [--limit 1]
        [--out results/repos/caller_replay_cost.json]

Since the caller replay, every captured equivalence input carries the frames its test reached
it through, and the comparison's agent context calls it through a replay of them
(``equiv_runner.py``, ``Replay`` in ``_verigap_forward.py``). Without callers (task files made
before, or the ``blind`` copy here) that context calls from its runner's frame, as before. The
oracle's workspace is graded by v2 with the task as made (``replay``) and with every input's
caller removed (``blind``), in alternation (blind, replay, replay, blind, ...) so load on a
shared machine hits both alike; both are graded once first (their reference answers are then
cached) and the 1-minute load average is recorded around every pair.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
import warnings
from pathlib import Path

from verigap.repos import baselines
from verigap.repos.graders import v2
from verigap.repos.tasks import load_tasks, materialize_workspace, prepared_for
from verigap.results import write_result


def blind(task):
    """``task`` with no recorded callers: the comparison calls from its runner's frame."""
    return task.model_copy(
        update={
            "equivalence": [
                x.model_copy(update={"caller": None, "test": None}) for x in task.equivalence
            ]
        }
    )


def measure(task_dir: Path, reps: int, limit: int) -> list[dict]:
    rows = []
    for task in load_tasks(task_dir)[:limit]:
        p = prepared_for(task)
        variants = {"replay": task, "blind": blind(task)}
        times: dict[str, list[float]] = {k: [] for k in variants}
        equiv: dict[str, list[float]] = {k: [] for k in variants}
        loads = []
        with tempfile.TemporaryDirectory(prefix="vg-replay-") as tmp:
            ws = materialize_workspace(p, task, Path(tmp) / "ws")
            for f, text in baselines.edits("oracle", task, p).items():
                (ws / f).write_text(text)
            for t in variants.values():  # warm: the reference's answers are computed here
                v = v2.evaluate(t, ws, prepared=p)
                if not v.correct:
                    raise RuntimeError(f"{task.task_id}: the oracle is not paid: {v.detail}")
            for i in range(reps):
                load0 = os.getloadavg()[0]
                order = ("blind", "replay") if i % 2 == 0 else ("replay", "blind")
                for k in order:
                    t0 = time.perf_counter()
                    v = v2.evaluate(variants[k], ws, prepared=p)
                    times[k].append(time.perf_counter() - t0)
                    equiv[k].append(v.detail["timings"]["equivalence_s"])
                    if not v.correct:
                        raise RuntimeError(f"{task.task_id}: verdict changed ({k})")
                loads.append(round((load0 + os.getloadavg()[0]) / 2, 2))
        med = {k: statistics.median(v) for k, v in times.items()}
        rows.append(
            {
                "task_id": task.task_id,
                "equivalence_inputs": len(task.equivalence),
                "with_caller": sum(1 for x in task.equivalence if x.caller),
                "replay_s": round(med["replay"], 3),
                "blind_s": round(med["blind"], 3),
                "ratio": round(med["replay"] / med["blind"], 3),
                "replay_equivalence_s": round(statistics.median(equiv["replay"]), 3),
                "blind_equivalence_s": round(statistics.median(equiv["blind"]), 3),
                "replay_all_s": [round(x, 3) for x in times["replay"]],
                "blind_all_s": [round(x, 3) for x in times["blind"]],
                "load_avg_1m": loads,
            }
        )
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("tasks", type=Path, nargs="+", help="task directories (make-tasks output)")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--limit", type=int, default=1, help="at most this many tasks per set")
    ap.add_argument("--out", type=Path, default=Path("results/repos/caller_replay_cost.json"))
    ap.add_argument("--command", default="", help="the command(s) that made the task sets")
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    sets = []
    for d in args.tasks:
        rows = measure(d, args.reps, args.limit)
        for r in rows:
            print(
                f"{r['task_id']}: replay {r['replay_s']:.2f}s | blind {r['blind_s']:.2f}s | "
                f"ratio {r['ratio']:.3f} | load {r['load_avg_1m']}"
            )
        sets.append(
            {
                "tasks_dir": str(d),
                "tasks": rows,
                "ratio_median": round(statistics.median(r["ratio"] for r in rows), 3),
            }
        )
    data = {
        "reps": args.reps,
        "cpus": os.cpu_count(),
        "sets": sets,
        "load_avg_1m_mean": round(
            statistics.mean(x for s in sets for r in s["tasks"] for x in r["load_avg_1m"]), 2
        ),
    }
    cmd = (f"{args.command} && " if args.command else "") + (
        "python benchmarks/repos_caller_replay.py "
        + " ".join(map(str, args.tasks))
        + f" --reps {args.reps} --limit {args.limit} --out {args.out}"
    )
    write_result(args.out, data, command=cmd)
    print(args.out)


if __name__ == "__main__":
    main()
