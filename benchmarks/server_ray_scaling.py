"""Repo grading on a local Ray cluster with one worker node, then two: the scaling curve.

Each node is a separate Ray node process on loopback with ``--cpus-per-node`` CPUs; the
workload is ``--jobs`` v2-graded scripted episodes (oracle and no-op alternating) through the
``ray`` executor, written to a fresh directory for each cluster size so nothing is cached.
Run: `python benchmarks/server_ray_scaling.py [--jobs 8]`; writes results/server/ray_scaling.json.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

FIXTURE_LIB = Path(__file__).parent.parent / "tests" / "repos" / "fixture_lib"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=8)
    ap.add_argument("--cpus-per-node", type=int, default=1)
    ap.add_argument("--out", default="results/server/ray_scaling.json")
    a = ap.parse_args()
    backend = "bwrap" if shutil.which("bwrap") else "unsafe"
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        os.environ["VERIGAP_CACHE"] = str(tmp_path / "cache")  # inherited by the node processes
        from verigap.repos import episode
        from verigap.repos.tasks import make_tasks
        from verigap.results import write_result
        from verigap.runs import local_ray_cluster, run_jobs

        make_tasks(
            str(FIXTURE_LIB),
            tmp_path / "tasks",
            k=2,
            n=2,
            max_candidates=8,
            seed=0,
            env="current",
            backend=backend,
            log=lambda s: None,
        )
        tasks = sorted(p for p in (tmp_path / "tasks").glob("*.json") if p.name != "index.json")
        paths = [tasks[i % len(tasks)] for i in range(a.jobs // 2)]
        stack = contextlib.ExitStack()
        cluster = stack.enter_context(local_ray_cluster(nodes=1, cpus_per_node=a.cpus_per_node))
        rows = []
        for nodes in (1, 2):
            if nodes == 2:
                cluster.add_node(num_cpus=a.cpus_per_node)
                cluster.wait_for_nodes()
            jobs = episode.jobs(
                paths,
                ["scripted:oracle", "scripted:noop"],
                ["v2"],
                tmp_path / f"out{nodes}",
                backend=backend,
            )
            # distinct task copies per job so that no two jobs share a run directory
            jobs = [
                dataclasses.replace(
                    j, name=f"{j.name}#{i}", run_dir=j.run_dir.with_name(f"{j.run_dir.name}-{i}")
                )
                for i, j in enumerate(jobs)
            ]
            t0 = time.perf_counter()
            results = run_jobs(jobs, executor="ray", progress=False)
            wall = time.perf_counter() - t0
            rows.append(
                {
                    "nodes": nodes,
                    "cpus": nodes * a.cpus_per_node,
                    "jobs": len(jobs),
                    "wall_s": round(wall, 2),
                    "jobs_per_s": round(len(jobs) / wall, 4),
                    "rewards": sorted(r["reward"] for r in results.values()),
                    "load_average_1m": os.getloadavg()[0],
                }
            )
            print(rows[-1])
        stack.close()
    rows[1]["speedup_vs_1"] = round(rows[0]["wall_s"] / rows[1]["wall_s"], 3)
    write_result(
        Path(a.out),
        {"backend": backend, "machine_cpus": os.cpu_count(), "rows": rows},
        command="python benchmarks/server_ray_scaling.py " + " ".join(sys.argv[1:]),
    )


if __name__ == "__main__":
    main()
