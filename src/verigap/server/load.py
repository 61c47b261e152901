"""Concurrent repo-task sessions against one server: the load test and its benchmark.

Each session plays one scripted agent (``oracle``: the reference edits; ``noop``: nothing)
through the HTTP API, and first writes a marker file only it knows, so a crossed workspace
shows. :func:`check` says what went wrong, if anything: a lost episode (no verdict, or missing
from the server's log), a crossed one (another session's marker, the wrong task, the wrong
reward for its agent), or a repeated episode id.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from verigap.server._client import Client

EXPECTED_REWARD = {"oracle": 1.0, "noop": 0.0}


@dataclass
class EpisodeRecord:
    index: int
    task_id: str
    agent: str
    session_id: str = ""
    episode_id: str = ""
    reward: float | None = None
    verdict_task: str | None = None
    markers_seen: list[str] = field(default_factory=list)
    step_s: list[float] = field(default_factory=list)  # every step but the grading submit
    submit_s: float = 0.0
    error: str | None = None


def play(
    url: str, token: str | None, index: int, task: Any, edits: dict[str, str], agent: str
) -> EpisodeRecord:
    """One whole episode in its own session (and its own HTTP connection)."""
    rec = EpisodeRecord(index, task.task_id, agent)
    try:
        with Client(url, token=token) as c, c.session("repo", grader="v2") as s:
            rec.session_id = s.id
            s.reset(seed=index, options={"task": task.task_id}, episode_id=f"load-{index}")
            rec.episode_id = s.state()["episode_id"]
            steps = [
                ("write_file", {"path": f"marker-{index}.txt", "content": str(index)}),
                ("list_files", {}),
            ]
            if agent == "oracle":
                steps += [
                    ("write_file", {"path": f, "content": t}) for f, t in sorted(edits.items())
                ]
            for tool, args in steps:
                t0 = time.perf_counter()
                out = s.step({"tool": tool, "arguments": args})
                rec.step_s.append(time.perf_counter() - t0)
                if tool == "list_files":
                    rec.markers_seen = sorted(
                        line
                        for line in out["observation"]["text"].split()
                        if line.startswith("marker-")
                    )
            t0 = time.perf_counter()
            out = s.step({"tool": "submit", "arguments": {"summary": agent}})
            rec.submit_s = time.perf_counter() - t0
            rec.reward = out["reward"]
            rec.verdict_task = out["observation"]["verdict"]["task_id"]
    except Exception as e:  # a failed episode is a finding of the load test, not a crash
        rec.error = f"{type(e).__name__}: {e}"
    return rec


def run_load(
    url: str,
    token: str | None,
    tasks: Sequence[Any],
    edits: Sequence[dict[str, str]],
    sessions: int,
    concurrency: int,
) -> tuple[list[EpisodeRecord], float]:
    """``sessions`` episodes, ``concurrency`` at a time, alternating oracle and noop over
    ``tasks``; returns the records and the wall time."""
    t0 = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        futures = [
            pool.submit(
                play,
                url,
                token,
                i,
                tasks[i % len(tasks)],
                edits[i % len(tasks)],
                ("oracle", "noop")[i % 2],
            )
            for i in range(sessions)
        ]
        records = [f.result() for f in futures]
    return records, time.perf_counter() - t0


def check(records: Sequence[EpisodeRecord], log_path: Path | Sequence[Path]) -> list[str]:
    """Every problem found: empty means no lost, crossed or repeated episode. ``log_path``: the
    server's verdict log, or every shard's log of a sharded deployment."""
    problems = []
    for r in records:
        where = f"episode {r.index} ({r.agent} on {r.task_id})"
        if r.error:
            problems.append(f"{where}: {r.error}")
            continue
        if r.markers_seen != [f"marker-{r.index}.txt"]:
            problems.append(f"{where}: saw markers {r.markers_seen}")
        if r.verdict_task != r.task_id:
            problems.append(f"{where}: verdict for {r.verdict_task}")
        if r.reward != EXPECTED_REWARD[r.agent]:
            problems.append(f"{where}: reward {r.reward}")
    ids = [r.episode_id for r in records]
    if len(set(ids)) != len(ids):
        problems.append(f"repeated episode ids: {ids}")
    logged = {}
    for path in [log_path] if isinstance(log_path, Path) else log_path:
        for line in path.read_text().splitlines() if path.is_file() else []:
            d = json.loads(line)
            logged[d["episode_id"]] = d
    for r in records:
        d = logged.get(r.episode_id)
        if d is None:
            problems.append(f"episode {r.index}: not in the server's verdict log")
        elif (d["session_id"], d["verdict"]["task_id"], d["verdict"]["reward"]) != (
            r.session_id,
            r.task_id,
            r.reward,
        ):
            problems.append(f"episode {r.index}: the log says {d}")
    return problems


def latency_summary(records: Sequence[EpisodeRecord], wall_s: float) -> dict[str, Any]:
    steps = np.array([s for r in records for s in r.step_s])
    submits = np.array([r.submit_s for r in records])
    ms = lambda a, q: round(float(np.percentile(a, q)) * 1000, 1)  # noqa: E731
    return {
        "episodes": len(records),
        "wall_s": round(wall_s, 3),
        "episodes_per_s": round(len(records) / wall_s, 4),
        "step_ms_p50": ms(steps, 50),
        "step_ms_p99": ms(steps, 99),
        "submit_ms_p50": ms(submits, 50),
        "submit_ms_p99": ms(submits, 99),
        "steps_timed": int(steps.size),
    }
