"""Repo-task sessions over HTTP: an oracle episode with the truth kept server-side, concurrent
sessions with no lost or crossed episodes, and a client that disconnects mid-step."""

from __future__ import annotations

import json
import shutil
import socket

import pytest

from verigap.repos import baselines
from verigap.repos.tasks import load_tasks, prepared_for
from verigap.server import BackgroundServer, Client, ServerConfig
from verigap.server.load import check, latency_summary, run_load


def backend() -> str:
    return "bwrap" if shutil.which("bwrap") else "unsafe"


TOKEN = "test-token"


@pytest.fixture(scope="module")
def served(repo_task_dir, tmp_path_factory):
    config = ServerConfig.with_tasks_from(
        repo_task_dir,
        root=tmp_path_factory.mktemp("repo"),
        token=TOKEN,
        backend=backend(),
        max_sessions=4,
    )
    task = load_tasks(repo_task_dir)[0]
    edits = baselines.edits("oracle", task, prepared_for(task, backend=backend()))
    with BackgroundServer(config) as url:
        yield url, config, task, edits


def test_concurrent_sessions_lose_and_cross_nothing(served):
    """Four sessions at once, oracle and noop alternating, each with its own marker file."""
    url, config, task, edits = served
    records, wall = run_load(url, TOKEN, [task], [edits], sessions=4, concurrency=4)
    assert check(records, config.root / "verdicts.jsonl") == []
    assert [r.reward for r in records] == [1.0, 0.0, 1.0, 0.0]
    stats = latency_summary(records, wall)
    assert stats["episodes"] == 4 and stats["steps_timed"] == 2 * 4 + 2 * len(edits)
    logged = [json.loads(x) for x in (config.root / "verdicts.jsonl").read_text().splitlines()]
    oracle = [d for d in logged if d["episode_id"] == "load-0"][0]["verdict"]
    assert oracle["correct"] is True and "diff" in oracle["detail"]  # the truth stays here
    assert check(records[:1], config.root / "missing.jsonl") != []  # the checker can fail


def test_a_client_that_disconnects_mid_step_corrupts_nothing(served):
    url, config, task, edits = served
    with Client(url, token=TOKEN) as c, c.session("repo", grader="v2") as s:
        s.reset(seed=0, options={"task": task.task_id})
        (path, text), *rest = sorted(edits.items())
        body = json.dumps(
            {"action": {"tool": "write_file", "arguments": {"path": path, "content": text}}}
        ).encode()
        port = int(url.rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port)) as raw:  # send, then hang up
            raw.sendall(
                f"POST /sessions/{s.id}/step HTTP/1.1\r\nHost: x\r\n"
                f"Authorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\n\r\n".encode()
                + body
            )
        state = s.state()
        assert state["step_count"] in (0, 1) and not state["done"]
        for f, t in [(path, text), *rest]:  # the client retries: writing again is harmless
            s.step({"tool": "write_file", "arguments": {"path": f, "content": t}})
        out = s.step({"tool": "submit", "arguments": {}})
        assert out["reward"] == 1.0 and out["observation"]["verdict"]["passed"] is True
