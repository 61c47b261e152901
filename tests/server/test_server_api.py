"""The HTTP API on a real loopback server: Patch World episodes, every bad-request path, auth,
the session limit, idle expiry, and a restart with a session in flight."""

from __future__ import annotations

import json
import shutil

import httpx
import numpy as np
import pytest

from verigap.patchworld.env import PatchWorldEnv
from verigap.patchworld.programs import generate
from verigap.server import (
    BackgroundServer,
    Client,
    RemotePatchWorldEnv,
    ServerConfig,
    ServerError,
    ServerUnreachable,
    SessionManager,
)


def backend() -> str:
    return "bwrap" if shutil.which("bwrap") else "unsafe"


TOKEN = "test-token"


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("server")
    clock = FakeClock()
    config = ServerConfig(root=root, token=TOKEN, max_sessions=3, idle_s=60.0, backend=backend())
    srv = BackgroundServer(config, SessionManager(config, clock=clock))
    srv.start()
    srv.clock = clock
    yield srv
    srv.stop()


@pytest.fixture
def client(server):
    with Client(server.url, token=TOKEN) as c:
        yield c
    server.sessions.close_all()


def status_of(fn, *args, **kw) -> tuple[int, str]:
    with pytest.raises(ServerError) as e:
        fn(*args, **kw)
    return e.value.status, e.value.detail


def test_patchworld_episode_matches_the_in_process_env(client):
    """Same program, same actions: the served episode pays and grades like PatchWorldEnv."""
    k = 3
    program = generate(k, 1, seed=5)
    local = PatchWorldEnv(k=k)
    obs_local, _ = local.reset(seed=0, options={"program": program})
    remote = RemotePatchWorldEnv(client, k=k)
    obs_remote, info = remote.reset(
        seed=0, options={"pool_seed": 5, "pool_size": 1, "indices": [0]}
    )
    assert info == {"k": k}
    for key in obs_local:
        assert np.array_equal(obs_local[key], obs_remote[key]), key
    for action in (int(program.reference[0, program.order[0, 0]]), 33, 32):
        a = local.step(action)
        b = remote.step(action)
        assert a[1:4] == b[1:4]
        assert all(np.array_equal(a[0][key], b[0][key]) for key in a[0])
    assert b[2] is True
    full, public = a[4]["verdict"], b[4]["verdict"]
    assert public["reward"] == full["reward"] and public["passed"] == full["passed"]
    assert set(public) == {"task_id", "reward", "passed", "checks"}  # no truth by default
    assert set(public["checks"]) == {"build", "visible"}
    remote.close()


def test_batched_session_state_and_server_side_truth(server, client):
    s = client.session("patchworld", k=2, reward="visible")
    out = s.reset(seed=1, options={"n": 5}, episode_id="ep-7")
    assert len(out["observation"]["target"]) == 5 and out["done"] is False
    assert s.state()["episode_id"] == "ep-7" and s.state()["step_count"] == 0
    s.step({"actions": [0] * 5})
    last = s.step({"actions": [33] * 5})
    assert last["done"] and len(last["observation"]["rewards"]) == 5
    assert all("correct" not in v for v in last["observation"]["verdict"])
    state = s.state()
    assert state["done"] and state["step_count"] == 2 and state["max_steps"] == 2
    logged = [json.loads(line) for line in server.sessions.log_path.read_text().splitlines()]
    mine = [r for r in logged if r["session_id"] == s.id]
    assert len(mine) == 5 and all("correct" in r["verdict"] for r in mine)  # truth kept here
    assert all(r["episode_id"] == "ep-7" for r in mine)


def test_every_bad_request_is_a_4xx_with_a_message(server, client):
    url = server.url
    anon = httpx.Client(base_url=url)
    assert anon.get("/health").status_code == 200  # health needs no token
    r = anon.post("/sessions", json={"env": "patchworld"})
    assert r.status_code == 401 and "bearer token" in r.json()["detail"]
    r = anon.get("/envs", headers={"Authorization": "Bearer nope"})
    assert r.status_code == 401 and "wrong bearer token" in r.json()["detail"]
    auth = {"Authorization": f"Bearer {TOKEN}"}
    r = anon.post("/sessions", content=b"{not json", headers=auth)
    assert r.status_code == 422 and "bad request body" in r.json()["detail"]

    assert status_of(client.session, "chess")[0] == 422
    code, msg = status_of(client.session, "patchworld", k=2, colour="red")
    assert code == 422 and "colour" in msg and "accepted fields" in msg
    code, msg = status_of(client.session, "patchworld", reward="bribe")
    assert code == 422 and "unknown reward scheme" in msg
    code, msg = status_of(client.session, "patchworld", max_steps=0)
    assert code == 422 and "max_steps" in msg
    code, msg = status_of(client.session, "silentbug", bug="x")
    assert code == 422 and "bug" in msg

    s = client.session("patchworld", k=2)
    code, msg = status_of(s.step, {"actions": [0]})
    assert code == 409 and "reset" in msg
    code, msg = status_of(s.reset, options={"indices": [0]})
    assert code == 422 and "pool_seed" in msg
    code, msg = status_of(s.reset, options={"pool_seed": 0, "pool_size": 4, "indices": [4]})
    assert code == 422 and "0..3" in msg
    code, msg = status_of(s.reset, options={"programs": 3})
    assert code == 422 and "programs" in msg
    code, _ = status_of(s.reset, seed=-1)
    assert code == 422
    s.reset(seed=0, options={"n": 2})
    code, msg = status_of(s.step, {"actions": [0]})
    assert code == 422 and "2 programs" in msg
    code, msg = status_of(s.step, {"actions": [0, 34]})
    assert code == 422 and "0..33" in msg
    code, msg = status_of(s.step, {"actions": [0, 1], "extra": 1})
    assert code == 422 and "extra" in msg
    code, msg = status_of(s.step, {"tool": "run"})
    assert code == 422 and "actions" in msg
    assert s.state()["step_count"] == 0  # refused actions change nothing
    s.step({"actions": [0, 1]})
    s.step({"actions": [0, 1]})
    code, msg = status_of(s.step, {"actions": [0, 1]})
    assert code == 409 and "over" in msg
    s.close()
    for fn, args in ((s.step, ({"actions": [0]},)), (s.reset, ()), (s.state, ()), (s.close, ())):
        code, msg = status_of(fn, *args)
        assert code == 404 and "POST /sessions" in msg


def test_session_limit_and_idle_expiry(server, client):
    sessions = [client.session("patchworld") for _ in range(3)]
    code, msg = status_of(client.session, "patchworld")
    assert code == 429 and "--max-sessions 3" in msg
    sessions[0].reset(seed=0)
    workdir = server.sessions.root / sessions[0].id
    assert workdir.is_dir()
    server.clock.now += 30
    sessions[1].reset(seed=0)  # touched: stays
    server.clock.now += 45  # sessions 0 and 2 now idle 75 s > 60 s, session 1 only 45 s
    sessions[1].state()
    assert not workdir.exists()
    code, msg = status_of(sessions[0].state)
    assert code == 404 and "expired after 60 s idle" in msg
    client.session("patchworld")  # room again: two expired


def test_restart_with_a_session_in_flight(tmp_path):
    """A restart drops sessions with a clear 404, deletes their workspaces, keeps every
    finished episode's verdict in the log and never logs the unfinished one."""
    config = ServerConfig(root=tmp_path, backend=backend())
    first = BackgroundServer(config)
    with Client(first.start()) as c:
        done = c.session("patchworld", k=1)
        done.reset(seed=0, options={"n": 3})
        done.step({"actions": [1, 2, 3]})
        flying = c.session("patchworld", k=2)
        flying.reset(seed=0)
        flying.step({"actions": [0]})
    first.stop()
    log = (tmp_path / "verdicts.jsonl").read_text().splitlines()
    assert len(log) == 3 and all(json.loads(x)["session_id"] == done.id for x in log)
    with pytest.raises(ServerUnreachable, match="is `verigap serve` running"):
        Client(first.url, timeout=5).health()
    (tmp_path / "sessions" / "stale-from-a-crash").mkdir()
    with BackgroundServer(config) as url, Client(url) as c:
        flying.client = c
        code, msg = status_of(flying.step, {"actions": [0]})
        assert code == 404 and "server restarted" in msg
        assert list((tmp_path / "sessions").iterdir()) == []
        fresh = c.session("patchworld", k=1)
        fresh.reset(seed=0)
        assert fresh.step({"actions": [5]})["done"]
    log = (tmp_path / "verdicts.jsonl").read_text().splitlines()
    assert len(log) == 4 and all(json.loads(x)["verdict"]["task_id"] for x in log)
