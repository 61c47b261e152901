"""Load on ``verigap serve``: concurrent repo-task sessions over loopback HTTP.

Each session plays a scripted oracle or no-op episode (marker file, list, edits, submit graded
by v2) and the run is checked for lost, crossed and repeated episodes. Reports p50/p99 step
latency (tool calls), p50/p99 submit latency (the grading step) and episodes per second, at each
concurrency. Run: `python benchmarks/server_load.py [--sessions 8] [--concurrency 1,4]`;
writes results/server/load.json.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

from verigap.repos import baselines
from verigap.repos.tasks import load_tasks, make_tasks, prepared_for
from verigap.results import write_result
from verigap.server import BackgroundServer, ServerConfig
from verigap.server.load import check, latency_summary, run_load

FIXTURE_LIB = Path(__file__).parent.parent / "tests" / "repos" / "fixture_lib"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sessions", type=int, default=8)
    ap.add_argument("--concurrency", default="1,4")
    ap.add_argument("--out", default="results/server/load.json")
    a = ap.parse_args()
    backend = "bwrap" if shutil.which("bwrap") else "unsafe"
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        os.environ["VERIGAP_CACHE"] = str(tmp_path / "cache")
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
        tasks = load_tasks(tmp_path / "tasks")
        edits = [baselines.edits("oracle", t, prepared_for(t, backend=backend)) for t in tasks]
        rows = []
        for conc in [int(c) for c in a.concurrency.split(",")]:
            config = ServerConfig.with_tasks_from(
                tmp_path / "tasks", root=tmp_path / f"s{conc}", backend=backend, max_sessions=conc
            )
            with BackgroundServer(config) as url:
                records, wall = run_load(url, None, tasks, edits, a.sessions, conc)
            problems = check(records, config.root / "verdicts.jsonl")
            rows.append(
                {"concurrency": conc, **latency_summary(records, wall), "problems": problems}
            )
            print(rows[-1])
    write_result(
        Path(a.out),
        {
            "sessions": a.sessions,
            "tasks": [t.task_id for t in tasks],
            "backend": backend,
            "cpus": os.cpu_count(),
            "load_average_1m_at_end": os.getloadavg()[0],
            "rows": rows,
        },
        command="python benchmarks/server_load.py " + " ".join(sys.argv[1:]),
    )


if __name__ == "__main__":
    main()
