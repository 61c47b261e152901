"""The environment server on Ray Serve, on a real local cluster (a head and a second node
process on loopback): sessions stick to the shard that made them, the shards sit on both nodes,
credentials and ownership behave as on one server, and a Patch World and a repo episode — over
the session API and over OpenEnv's WebSocket — get the same verdicts as one plain process."""

from __future__ import annotations

import json
import shutil
import socket

import httpx
import pytest

from verigap.server import BackgroundServer, Client, ServerConfig, ServerError

pytest.importorskip("ray.serve")
openenv = pytest.importorskip("openenv.core")

TRUTH = "serve-evaluator-token-0123"
OTHER = "serve-other-client-token-01"


def backend() -> str:
    return "bwrap" if shutil.which("bwrap") else "unsafe"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def config_for(tasks, root) -> ServerConfig:
    return ServerConfig.with_tasks_from(
        tasks,
        root=root,
        backend=backend(),
        max_sessions=4,
        clients={"evaluator": {"token": TRUTH, "truth": True}, "other": {"token": OTHER}},
    )


@pytest.fixture(scope="module")
def served(repo_task_dir, tmp_path_factory):
    """The Serve deployment (two shards on a two-node cluster) and one plain server."""
    from verigap.runs import local_ray_cluster
    from verigap.server.rayserve import deploy, shutdown

    try:
        cm = local_ray_cluster(nodes=2, cpus_per_node=1, attempts=2)
        cm.__enter__()
    except Exception as e:  # only Ray's own start-up deadlines, on an overloaded machine
        if "timed out during startup" not in str(e):
            raise
        pytest.skip(f"a two-node local Ray cluster did not start here: {e}")
    try:
        url = deploy(
            config_for(repo_task_dir, tmp_path_factory.mktemp("serve")), shards=2, port=free_port()
        )
        with BackgroundServer(config_for(repo_task_dir, tmp_path_factory.mktemp("plain"))) as plain:
            yield url, plain
        shutdown()
    finally:
        cm.__exit__(None, None, None)


def oracle_edits(repo_task_dir) -> tuple[str, dict[str, str]]:
    from verigap.repos import baselines
    from verigap.repos.tasks import load_tasks, prepared_for

    task = load_tasks(repo_task_dir)[0]
    return task.task_id, baselines.edits("oracle", task, prepared_for(task, backend=backend()))


def truth_of(verdicts: list[dict]) -> list[tuple]:
    return [
        (
            v["task_id"],
            v["reward"],
            v["correct"],
            v["false_success"],
            tuple(v["hacks"]),
            v["status"],
        )
        for v in verdicts
    ]


def play(url: str, task: str, edits: dict[str, str], tag: str) -> tuple[list, list]:
    """A Patch World batch and a repo oracle episode; what the client saw and the truth."""
    seen = []
    with Client(url, token=TRUTH) as c:
        with c.session("patchworld", k=3, reward="visible") as s:
            s.reset(
                seed=3,
                options={"pool_seed": 5, "pool_size": 4, "indices": [0, 1, 2, 3]},
                episode_id=f"pw-{tag}",
            )
            for a in ([0, 33, 32, 5], [33, 1, 2, 3], [7, 7, 7, 7]):
                out = s.step({"actions": a})
                seen.append((out["reward"], out["done"], out["observation"]["rewards"]))
        with c.session("repo", grader="v2") as s:
            s.reset(seed=0, options={"task": task}, episode_id=f"repo-{tag}")
            for path, text in sorted(edits.items()):
                s.step({"tool": "write_file", "arguments": {"path": path, "content": text}})
            out = s.step({"tool": "submit", "arguments": {"summary": "oracle"}})
            seen.append((out["reward"], out["done"], out["observation"]["verdict"]))
        truth = [truth_of(c.truth(f"{kind}-{tag}")["verdicts"]) for kind in ("pw", "repo")]
    return seen, truth


@pytest.mark.slow
def test_episodes_through_serve_get_the_verdicts_of_one_process(served, repo_task_dir):
    url, plain = served
    task, edits = oracle_edits(repo_task_dir)
    seen_serve, truth_serve = play(url, task, edits, "serve")
    seen_plain, truth_plain = play(plain, task, edits, "plain")
    assert seen_serve == seen_plain
    assert truth_serve == truth_plain
    assert truth_serve[1] == [(task, 1.0, True, False, (), "OK")]


@pytest.mark.slow
def test_sessions_are_spread_over_both_nodes_and_stick_to_their_shard(served):
    import ray

    from verigap.server.rayserve import shard_nodes

    url, _ = served
    with Client(url, token=TRUTH) as c:
        sessions = [c.session("patchworld", k=2) for _ in range(4)]
        assert sorted(s.id[:3] for s in sessions) == ["s0-", "s0-", "s1-", "s1-"]
        for i, s in enumerate(sessions):  # each answers from its own shard, with its own state
            s.reset(seed=i, options={"n": 1}, episode_id=f"stick-{i}")
        assert [s.state()["episode_id"] for s in sessions] == [f"stick-{i}" for i in range(4)]
        assert sorted(x["session_id"] for x in c.sessions()) == sorted(s.id for s in sessions)
        assert c.health()["sessions"] == 4
        assert sorted(c.close_sessions()) == sorted(s.id for s in sessions)
        assert c.sessions() == []
    nodes = {n["NodeID"] for n in ray.nodes() if n["Alive"]}
    assert len(nodes) == 2 and set(shard_nodes(2)) == nodes


@pytest.mark.slow
def test_credentials_and_ownership_as_on_one_server(served):
    url, _ = served
    with Client(url, token=TRUTH) as mine, Client(url, token=OTHER) as theirs:
        s = mine.session("patchworld", k=2)
        s.reset(seed=0, options={"n": 1})
        with pytest.raises(ServerError) as e:
            theirs.request("GET", f"/sessions/{s.id}/state")
        assert e.value.status == 404 and "another client" in e.value.detail
        with pytest.raises(ServerError) as e:
            theirs.truth("pw-serve")
        assert e.value.status == 403
        assert theirs.sessions() == []
        s.close()
    anon = httpx.get(f"{url}/sessions/s0-0000/state")
    assert anon.status_code == 401 and "bearer token" in anon.json()["detail"]
    unknown = httpx.get(
        f"{url}/sessions/nosuch/state", headers={"Authorization": f"Bearer {TRUTH}"}
    )
    assert unknown.status_code == 404 and "no session 'nosuch'" in unknown.json()["detail"]


@pytest.mark.slow
def test_openenv_websocket_through_serve_plays_like_one_process(served, repo_task_dir):
    url, plain = served
    task, _ = oracle_edits(repo_task_dir)

    def episode(base: str) -> list:
        base = base.replace("http://", f"http://evaluator:{TRUTH}@")
        got = []
        with openenv.GenericEnvClient(base_url=base).sync() as env:
            first = env.reset(
                seed=0, config={"k": 3}, options={"pool_seed": 5, "pool_size": 8, "indices": [2]}
            )
            got.append(first.observation["values"])
            for a in (33, 0, 33):
                out = env.step({"actions": [a]})
                got.append((out.reward, out.done))
            with pytest.raises(RuntimeError, match="episode is over"):
                env.step({"actions": [0]})
        with openenv.GenericEnvClient(base_url=base + "/envs/repo").sync() as env:
            env.reset(seed=0, options={"task": task})
            end = env.step({"tool": "submit", "arguments": {}})
            got.append((end.reward, end.done, end.observation["verdict"]))
        return got

    assert episode(url) == episode(plain)
    with Client(url, token=TRUTH) as c:  # each socket's session closed with it
        assert c.sessions() == []


def test_a_session_id_names_its_shard_and_any_other_id_still_meets_a_server(tmp_path):
    from verigap.server.rayserve import shard_configs, shard_of

    configs = shard_configs(config_for(None, tmp_path), 3)
    assert [(c.root.name, c.session_prefix) for c in configs] == [
        ("shard0", "s0-"),
        ("shard1", "s1-"),
        ("shard2", "s2-"),
    ]
    assert [shard_of(f"s{i}-0123abcd", 3) for i in range(3)] == [0, 1, 2]
    for odd in ("s7-0123", "nosuch", "s-1", ""):  # stable, and always a real shard
        assert shard_of(odd, 3) == shard_of(odd, 3) in (0, 1, 2)


def test_fanned_out_answers_merge_and_a_refusal_wins():
    from verigap.server.rayserve import _merge

    def ok(d):
        return 200, [], json.dumps(d).encode()

    lists = [
        ok({"client": "a", "sessions": [{"session_id": "s0-1"}]}),
        ok({"client": "a", "sessions": [{"session_id": "s1-2"}]}),
    ]
    assert json.loads(_merge("/sessions", "GET", lists)[2])["sessions"] == [
        {"session_id": "s0-1"},
        {"session_id": "s1-2"},
    ]
    health = _merge("/health", "GET", [ok({"sessions": 2}), ok({"sessions": 3})])
    assert json.loads(health[2])["sessions"] == 5
    refused = (401, [], b'{"detail": "wrong bearer token"}')
    assert _merge("/sessions", "DELETE", [ok({"closed": []}), refused]) == refused
    missing = (404, [], b'{"detail": "no finished episode"}')
    assert _merge("/episodes/e/truth", "GET", [missing, ok({"episode_id": "e"})])[0] == 200
    assert _merge("/episodes/e/truth", "GET", [missing, missing]) == missing


def test_cli_refuses_a_shard_count_below_one():
    from typer.testing import CliRunner

    from verigap.cli import app

    r = CliRunner().invoke(app, ["serve", "--ray-shards", "-1"])
    assert r.exit_code == 2 and "serve on at least one shard" in r.output
