"""openenv-core's own client against a real ``verigap serve`` on loopback, for every family:
the WebSocket session (reset / step / state / close), the stateless HTTP routes, ``/schema``,
``/metadata`` and ``/health``, and credentials sent the only way its client can (the URL)."""

from __future__ import annotations

import shutil

import httpx
import pytest

from verigap.patchworld.env import PatchWorldEnv
from verigap.server import BackgroundServer, ServerConfig

openenv = pytest.importorskip("openenv.core")
GenericEnvClient = openenv.GenericEnvClient

TOKEN = "openenv-test-token-0123"
BUG = "single_recomputed_old_logprob"


def backend() -> str:
    return "bwrap" if shutil.which("bwrap") else "unsafe"


@pytest.fixture(scope="module")
def served(repo_task_dir, tmp_path_factory):
    config = ServerConfig.with_tasks_from(
        repo_task_dir,
        root=tmp_path_factory.mktemp("openenv"),
        backend=backend(),
        clients={"trainer": {"token": TOKEN, "truth": True}},
        max_sessions=4,
    )
    with BackgroundServer(config) as url:
        yield url, config


def with_token(url: str) -> str:
    return url.replace("http://", f"http://trainer:{TOKEN}@")


def test_the_root_url_serves_patchworld_like_the_local_env(served):
    url, _ = served
    local = PatchWorldEnv(k=3)
    with GenericEnvClient(base_url=with_token(url)).sync() as env:
        first = env.reset(
            seed=0, config={"k": 3}, options={"pool_seed": 5, "pool_size": 8, "indices": [2]}
        )
        obs, _ = local.reset(
            seed=0,
            options={
                "program": __import__(
                    "verigap.patchworld.programs", fromlist=["generate"]
                ).generate(3, 8, seed=5)[2]
            },
        )
        assert first.done is False and first.observation["values"][0] == obs["values"].tolist()
        assert env.state()["step_count"] == 0
        for action in (33, 33, 33):
            out = env.step({"actions": [action]})
            local.step(action)
        assert out.done is True and out.reward == 0.0  # deleting everything fails the checks
        state = env.state()
        assert state["done"] and state["step_count"] == 3 and state["env"] == "patchworld"
        assert set(out.observation["verdict"][0]) == {"task_id", "reward", "passed", "checks"}


def test_a_repo_episode_over_the_websocket(served):
    url, config = served
    task = sorted(config.tasks)[0]
    with GenericEnvClient(base_url=with_token(url) + "/envs/repo").sync() as env:
        first = env.reset(seed=0, options={"task": task})
        assert "submit" in {t["name"] for t in first.observation["tools"]}
        listed = env.step({"tool": "list_files", "arguments": {}})
        assert not listed.observation["is_error"] and listed.done is False
        bad = env.step({"tool": "read_file", "arguments": {}})  # an error observation
        assert bad.observation["is_error"] and bad.done is False
        end = env.step({"tool": "submit", "arguments": {}})
        assert end.done is True and end.reward == 0.0  # v2 pays an unrepaired task nothing
        assert "correct" not in end.observation["verdict"]
        with pytest.raises(RuntimeError, match="episode is over"):
            env.step({"tool": "list_files", "arguments": {}})


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="the silent-bug tools need bubblewrap")
def test_a_silentbug_session_over_the_websocket(served):
    url, _ = served
    with GenericEnvClient(base_url=with_token(url) + "/envs/silentbug").sync() as env:
        first = env.reset(seed=0, options={"bug": BUG})
        assert "submit_diagnosis" in {t["name"] for t in first.observation["tools"]}
        out = env.step({"tool": "list_files", "arguments": {}})
        assert "ppo_single.py" in out.observation["text"] and out.done is False
        assert env.state()["task_id"] == BUG


def test_the_socket_owns_its_session_and_errors_come_back_as_messages(served):
    url, _ = served
    http = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {TOKEN}"})
    with GenericEnvClient(base_url=with_token(url)).sync() as env:
        with pytest.raises(RuntimeError, match="send a reset first"):
            env.step({"actions": [0]})
        env.reset(seed=1)
        assert len(http.get("/sessions").json()["sessions"]) == 1
        with pytest.raises(RuntimeError, match="0..33"):
            env.step({"actions": [10**30]})  # out of range: a message, not a crash
        with pytest.raises(RuntimeError, match="unknown env"):
            env.reset(env="chess")
        assert env.step({"actions": [4]}).done is False  # the session survived both
    assert http.get("/sessions").json()["sessions"] == []  # closed with its socket


def test_credentials_are_required_on_the_socket(served):
    url, _ = served
    with GenericEnvClient(base_url=url).sync() as env:
        with pytest.raises(RuntimeError, match="missing bearer token"):
            env.reset()
    wrong = url.replace("http://", "http://trainer:not-the-token@")
    with GenericEnvClient(base_url=wrong).sync() as env:
        with pytest.raises(RuntimeError, match="wrong bearer token"):
            env.reset()


def test_stateless_http_routes_schema_and_metadata(served):
    url, config = served
    http = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {TOKEN}"})
    assert httpx.get(f"{url}/health").json()["status"] == "healthy"
    for env in ("patchworld", "repo", "silentbug"):
        schema = http.get(f"/envs/{env}/schema").json()
        assert set(schema) == {"action", "observation", "state"}
        assert http.get(f"/envs/{env}/metadata").json()["name"] == f"verigap/{env}"
        assert http.get(f"/envs/{env}/health").json()["status"] == "healthy"
    assert "actions" in http.get("/schema").json()["action"]["properties"]
    r = http.post("/reset", json={"seed": 3, "episode_id": "e1", "config": {"k": 2}})
    assert r.status_code == 200 and len(r.json()["observation"]["values"]) == 1
    r = http.post(
        "/envs/repo/reset", json={"seed": 0, "options": {"task": sorted(config.tasks)[0]}}
    )
    assert r.status_code == 200 and r.json()["observation"]["tools"]
    r = http.post("/step", json={"action": {"actions": [0]}, "timeout_s": 5, "request_id": "r"})
    assert r.status_code == 409 and "/ws" in r.json()["detail"]
    assert http.get("/state").json() == {"episode_id": None, "step_count": 0, "env": "patchworld"}
    assert http.get("/sessions").json()["sessions"] == []  # stateless resets left nothing open
    assert http.get("/envs/chess/schema").status_code == 422


def test_mcp_tool_calls_over_the_websocket(served):
    """openenv-core's MCPToolClient: list_tools and call_tool as step actions on /ws."""
    import asyncio

    from openenv.core import MCPToolClient

    url, config = served

    async def play() -> tuple[set[str], str, float | None]:
        async with MCPToolClient(base_url=with_token(url) + "/envs/repo") as env:
            await env.reset(seed=0, options={"task": sorted(config.tasks)[0]})
            names = {t.name for t in await env.list_tools()}
            listed = await env.call_tool("list_files")
            end = await env.step(openenv.CallToolAction(tool_name="submit", arguments={}))
            return names, listed, end.reward if end.done else None

    names, listed, reward = asyncio.run(play())
    assert {"run", "read_file", "write_file", "submit"} <= names
    assert isinstance(listed, str) and listed
    assert reward == 0.0  # the episode ended and v2 paid the unrepaired task nothing
