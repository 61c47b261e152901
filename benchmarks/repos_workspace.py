"""An agent episode's workspace: made per episode (``materialize_workspace``: the task's
mutations through libcst, then a git commit) against taken from the task's pool
(``episode.agent_workspace``: a copy of v2's cached base plus the same commit, made ahead and
already owned by its sandbox uid), in alternation, on real task sets.

    PYTHONPATH=src python benchmarks/repos_workspace.py TASKS_DIR [TASKS_DIR ...] [--rounds 5]
        [--out results/repos/episode_workspace.json]

Per task: one untimed take first (it builds the pool's template and copies on the spot, as an
episode's first take of a task in a process does; timed apart as ``first_take_ms``), then
``--rounds`` rounds of (made per episode, taken from the pool), each pool take followed by an
untimed wait for the pool to refill (an episode's minutes hide it). Both make the same files
and the same commit (checked every round). Wall and CPU time of this process and its children;
the load average is recorded around the run. Goal: at most 50 ms on disk.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

from verigap.repos import episode
from verigap.repos.tasks import load_tasks, materialize_workspace, prepared_for
from verigap.results import write_result
from verigap.sandbox import discard, wait_discarded

GOAL_MS = 50.0


def cpu_s() -> float:
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def head(ws: Path) -> str:
    return subprocess.run(
        ["git", "-c", "safe.directory=*", "rev-parse", "HEAD"],
        cwd=ws,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("tasks", type=Path, nargs="+")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--out", type=Path, default=Path("results/repos/episode_workspace.json"))
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    backend = "bwrap"
    load0 = os.getloadavg()
    rows = []
    with tempfile.TemporaryDirectory(prefix="vg-ws-bench-") as tmp_s:
        tmp = Path(tmp_s)
        n = iter(range(10**6))
        for task_dir in args.tasks:
            task = load_tasks(task_dir)[0]
            p = prepared_for(task, backend=backend)
            t0, c0 = time.perf_counter(), cpu_s()
            ws, _ = episode.agent_workspace(p, task, tmp / f"w{next(n)}", backend=backend)
            first = ((time.perf_counter() - t0) * 1e3, (cpu_s() - c0) * 1e3)
            want = head(ws)
            walls: dict[str, list[float]] = {"per_episode": [], "pool": []}
            cpus: dict[str, list[float]] = {"per_episode": [], "pool": []}
            for _ in range(args.rounds):
                for name in ("per_episode", "pool"):
                    dest = tmp / f"w{next(n)}"
                    t0, c0 = time.perf_counter(), cpu_s()
                    if name == "pool":
                        got, _ = episode.agent_workspace(p, task, dest, backend=backend)
                    else:
                        got = materialize_workspace(p, task, dest)
                    walls[name].append((time.perf_counter() - t0) * 1e3)
                    cpus[name].append((cpu_s() - c0) * 1e3)
                    if head(got) != want:
                        raise SystemExit(f"{task.task_id}: {name} made another commit")
                    discard(got)
                    if name == "pool":
                        for pool in episode._WORKSPACES.pools.values():
                            pool.wait_ready(timeout=600)
                    wait_discarded(timeout=600)
            row = {
                "task_id": task.task_id,
                "files": sum(1 for _ in ws.rglob("*")),
                "first_take_ms": round(first[0], 1),
                "first_take_cpu_ms": round(first[1], 1),
            }
            for name in walls:
                row[f"{name}_wall_median_ms"] = round(statistics.median(walls[name]), 1)
                row[f"{name}_cpu_median_ms"] = round(statistics.median(cpus[name]), 1)
            row["ratio_wall_median"] = round(
                statistics.median(
                    a / b for a, b in zip(walls["per_episode"], walls["pool"], strict=True)
                ),
                1,
            )
            rows.append(row)
            print(row, flush=True)
    episode._WORKSPACES.close()
    data = {
        "rounds": args.rounds,
        "cpus": os.cpu_count(),
        "tasks": rows,
        "goal_ms": GOAL_MS,
        "goal_met_pool_wall_median": all(r["pool_wall_median_ms"] <= GOAL_MS for r in rows),
        "load_average_before": list(load0),
        "load_average_after": list(os.getloadavg()),
    }
    cmd = "PYTHONPATH=src python benchmarks/repos_workspace.py " + " ".join(sys.argv[1:])
    write_result(args.out, data, command=cmd)
    print(args.out)


if __name__ == "__main__":
    main()
