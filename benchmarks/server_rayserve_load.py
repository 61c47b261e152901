"""Load on the environment server deployed on Ray Serve against one plain server process.

One run, one machine state: a local two-node Ray cluster (a head and a second node process on
loopback, one CPU each) is started and the Serve deployment put on it (two shards, one per
node, behind the router); then the same repo-task episodes (v2-graded scripted oracle and no-op,
alternating, each writing a marker file only it knows) are played first against a plain
``BackgroundServer`` and then through Serve, ``--concurrency`` sessions at a time. Both runs are
checked for lost, crossed and repeated episodes, and their verdicts (each episode's reward and
its server-side truth) compared episode by episode.
Run: `python benchmarks/server_rayserve_load.py [--sessions 8] [--concurrency 4]`;
writes results/server/rayserve_load.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import sys
import tempfile
from pathlib import Path

FIXTURE_LIB = Path(__file__).parent.parent / "tests" / "repos" / "fixture_lib"


def truth_by_episode(logs: list[Path]) -> dict[str, tuple]:
    """episode id -> (task, reward, correct, false_success, hacks, status) from verdict logs."""
    out = {}
    for path in logs:
        for line in path.read_text().splitlines() if path.is_file() else []:
            d = json.loads(line)
            v = d["verdict"]
            out[d["episode_id"]] = (
                v["task_id"],
                v["reward"],
                v["correct"],
                v["false_success"],
                list(v["hacks"]),
                v["status"],
            )
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sessions", type=int, default=8)
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--shards", type=int, default=2)
    ap.add_argument("--out", default="results/server/rayserve_load.json")
    a = ap.parse_args()
    backend = "bwrap" if shutil.which("bwrap") else "unsafe"
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        os.environ["VERIGAP_CACHE"] = str(tmp_path / "cache")  # inherited by the node processes
        import ray

        from verigap.repos import baselines
        from verigap.repos.tasks import load_tasks, make_tasks, prepared_for
        from verigap.results import write_result
        from verigap.runs import local_ray_cluster
        from verigap.server import BackgroundServer, ServerConfig
        from verigap.server.load import check, latency_summary, run_load
        from verigap.server.rayserve import deploy, shard_nodes, shutdown

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

        def config(root: Path, max_sessions: int) -> ServerConfig:
            return ServerConfig.with_tasks_from(
                tmp_path / "tasks", root=root, backend=backend, max_sessions=max_sessions
            )

        rows, truths = [], []
        with local_ray_cluster(nodes=2, cpus_per_node=1):
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                port = s.getsockname()[1]
            per_shard = -(-a.concurrency // a.shards)
            serve_url = deploy(config(tmp_path / "serve", per_shard), shards=a.shards, port=port)
            nodes = shard_nodes(a.shards)
            alive = [n["NodeID"] for n in ray.nodes() if n["Alive"]]
            plain_config = config(tmp_path / "plain", a.concurrency)
            with BackgroundServer(plain_config) as plain_url:
                runs = [
                    ("plain", plain_url, [plain_config.root / "verdicts.jsonl"]),
                    (
                        "ray_serve",
                        serve_url,
                        [
                            tmp_path / "serve" / f"shard{i}" / "verdicts.jsonl"
                            for i in range(a.shards)
                        ],
                    ),
                ]
                for name, url, logs in runs:
                    records, wall = run_load(url, None, tasks, edits, a.sessions, a.concurrency)
                    rows.append(
                        {
                            "server": name,
                            **latency_summary(records, wall),
                            "problems": check(records, logs),
                            "rewards": [r.reward for r in records],
                            "load_average_1m_at_end": os.getloadavg()[0],
                        }
                    )
                    truths.append(truth_by_episode(logs))
                    print({k: v for k, v in rows[-1].items() if k != "rewards"})
            shutdown()
    plain, served = rows
    same = (
        plain["rewards"] == served["rewards"]
        and truths[0] == truths[1]
        and len(truths[0]) == a.sessions
    )
    write_result(
        Path(a.out),
        {
            "sessions": a.sessions,
            "concurrency": a.concurrency,
            "shards": a.shards,
            "max_sessions_per_shard": per_shard,
            "nodes": len(alive),
            "shard_nodes_distinct": len(set(nodes)),
            "tasks": [t.task_id for t in tasks],
            "backend": backend,
            "cpus": os.cpu_count(),
            "same_verdicts": same,
            "episodes_per_s_ratio": round(served["episodes_per_s"] / plain["episodes_per_s"], 3),
            "rows": rows,
        },
        command="python benchmarks/server_rayserve_load.py " + " ".join(sys.argv[1:]),
    )


if __name__ == "__main__":
    main()
