"""A server that stays up: no session stalls another or /health, every error is JSON, request
sizes are capped at the sandbox's file limit, docs sit behind the token, sessions belong to the
client that made them, and an episode's truth is fetched per episode by a client allowed it."""

from __future__ import annotations

import shutil
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from verigap.server import BackgroundServer, Client, ServerConfig, ServerError

ALICE, BOB = "alice-token-0123456789", "bob-token-0123456789xx"


def backend() -> str:
    return "bwrap" if shutil.which("bwrap") else "unsafe"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    config = ServerConfig(
        root=tmp_path_factory.mktemp("robust"),
        backend=backend(),
        clients={"alice": {"token": ALICE, "truth": True}, "bob": {"token": BOB}},
        max_sessions=6,
    )
    srv = BackgroundServer(config)
    srv.start()
    yield srv
    srv.stop()


def http(url: str, token: str | None) -> httpx.Client:
    return httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"} if token else {})


def error_of(fn, *args, **kw) -> tuple[int, str]:
    with pytest.raises(ServerError) as e:
        fn(*args, **kw)
    return e.value.status, e.value.detail


def test_a_session_belongs_to_the_client_that_made_it(server):
    with Client(server.url, token=ALICE) as a, Client(server.url, token=BOB) as b:
        mine = a.session("patchworld", k=2)
        mine.reset(seed=0)
        theirs = b.session("patchworld", k=2)
        assert [s["session_id"] for s in a.sessions()] == [mine.id]
        assert [s["session_id"] for s in b.sessions()] == [theirs.id]
        stolen = type(mine)(b, mine.id, "patchworld")  # bob knows alice's id
        for fn, args in (
            (stolen.step, ({"actions": [0]},)),
            (stolen.state, ()),
            (stolen.close, ()),
        ):
            code, msg = error_of(fn, *args)
            assert code == 404 and "of client 'bob'" in msg
        assert mine.state()["step_count"] == 0  # untouched
        assert b.close_sessions() == [theirs.id]
        assert [s["session_id"] for s in a.sessions()] == [mine.id]
        assert a.close_sessions() == [mine.id] and a.sessions() == []


def test_truth_per_episode_only_for_a_client_allowed_it(server):
    with Client(server.url, token=ALICE) as a, Client(server.url, token=BOB) as b:
        for c, eid in ((a, "alice-ep"), (b, "bob-ep")):
            s = c.session("patchworld", k=1)
            s.reset(seed=0, options={"n": 2}, episode_id=eid)
            out = s.step({"actions": [33, 33]})
            assert out["done"] and all("correct" not in v for v in out["observation"]["verdict"])
        full = a.truth("alice-ep")["verdicts"]
        assert len(full) == 2 and all(v["correct"] is False for v in full)
        code, msg = error_of(b.truth, "bob-ep")
        assert code == 403 and '"truth": true' in msg
        code, _ = error_of(a.truth, "bob-ep")  # another client's episode does not exist for you
        assert code == 404
        a.close_sessions()
        b.close_sessions()


def test_every_error_is_json_and_the_connection_survives(server):
    with http(server.url, ALICE) as h:
        sid = h.post("/sessions", json={"env": "patchworld", "config": {"k": 2}}).json()
        sid = sid["session_id"]
        h.post(f"/sessions/{sid}/reset", json={"seed": 0})
        for bad in (10**30, -1, 34):
            r = h.post(f"/sessions/{sid}/step", json={"action": {"actions": [bad]}})
            assert r.status_code == 422 and "0..33" in r.json()["detail"]
        r = h.post(
            f"/sessions/{sid}/step",
            content=b"{not json",
            headers={"Content-Type": "application/json"},
        )
        assert r.status_code == 422 and "bad request body" in r.json()["detail"]
        r = h.post(f"/sessions/{sid}/step", json={"action": {"actions": [3]}})
        assert r.status_code == 200  # same connection, same session: both still fine
        assert h.get(f"/sessions/{sid}/state").json()["step_count"] == 1
        h.delete("/sessions")


def test_an_unexpected_failure_is_a_json_500_and_the_session_stays(server):
    with http(server.url, ALICE) as h:
        sid = h.post("/sessions", json={"env": "patchworld"}).json()["session_id"]
        h.post(f"/sessions/{sid}/reset", json={"seed": 0})
        served = server.sessions._sessions[sid].env
        real = served.step
        served.step = lambda action, timeout_s=None: 1 / 0
        r = h.post(f"/sessions/{sid}/step", json={"action": {"actions": [1]}})
        assert r.status_code == 500 and "ZeroDivisionError" in r.json()["detail"]
        served.step = real
        assert h.post(f"/sessions/{sid}/step", json={"action": {"actions": [1]}}).status_code == 200
        h.delete("/sessions")


def test_a_retried_step_with_the_same_request_id_steps_once(server):
    with Client(server.url, token=ALICE) as a:
        s = a.session("patchworld", k=3)
        s.reset(seed=0)
        first = s.step({"actions": [5]}, timeout_s=30, request_id="r-1")
        again = s.step({"actions": [5]}, timeout_s=30, request_id="r-1")
        assert first == again and s.state()["step_count"] == 1
        s.step({"actions": [5]}, request_id="r-2")
        assert s.state()["step_count"] == 2
        a.close_sessions()


def test_docs_and_openapi_need_the_token(server):
    for path in ("/docs", "/openapi.json"):
        assert httpx.get(f"{server.url}{path}").status_code == 401
        assert http(server.url, BOB).get(path).status_code == 200
    assert httpx.get(f"{server.url}/health").status_code == 200


def test_a_session_may_ask_to_expire_sooner(tmp_path):
    config = ServerConfig(root=tmp_path, backend=backend(), idle_s=600)
    with BackgroundServer(config) as url, Client(url) as c:
        s = c.session("patchworld", idle_s=0.2)
        time.sleep(0.5)
        code, _ = error_of(s.state)
        assert code == 404 and c.sessions() == []


@pytest.fixture(scope="module")
def repo_server(repo_task_dir, tmp_path_factory):
    config = ServerConfig.with_tasks_from(
        repo_task_dir,
        root=tmp_path_factory.mktemp("stall"),
        backend=backend(),
        token=ALICE,
        max_file_mb=1,
        max_sessions=4,
    )
    with BackgroundServer(config) as url:
        yield url, sorted(config.tasks)[0]


def test_a_long_command_stalls_neither_health_nor_another_session(repo_server):
    """One session runs ``sleep 8``; meanwhile 45 concurrent GETs of its own state, /health
    and another session's state all answer at once."""
    url, task = repo_server
    with Client(url, token=ALICE) as c:
        slow, other = c.session("repo"), c.session("patchworld")
        slow.reset(seed=0, options={"task": task})
        other.reset(seed=0)
        with ThreadPoolExecutor(50) as pool:
            t0 = time.monotonic()
            busy = pool.submit(slow.step, {"tool": "run", "arguments": {"command": "sleep 8"}})
            time.sleep(0.5)
            assert not busy.done()

            def timed(fn):
                t = time.monotonic()
                fn()
                return time.monotonic() - t

            states = [pool.submit(timed, slow.state) for _ in range(45)]
            health = timed(c.health)
            theirs = timed(other.state)
            step = timed(lambda: other.step({"actions": [1]}))
            waits = [f.result() for f in states]
            assert not busy.done()  # all of the above answered while the command ran
            assert max(waits) < 4 and health < 2 and theirs < 2 and step < 2
            assert busy.result()["observation"]["is_error"] is False
            assert time.monotonic() - t0 >= 8
        c.close_sessions()


def test_request_sizes_are_capped_at_the_sandbox_file_limit(repo_server):
    url, task = repo_server
    with Client(url, token=ALICE) as c:
        s = c.session("repo")
        s.reset(seed=0, options={"task": task})
        big = "x" * (1024 * 1024 + 10)  # over --max-file-mb 1
        code, msg = error_of(
            s.step, {"tool": "write_file", "arguments": {"path": "big.txt", "content": big}}
        )
        assert code == 413 and "--max-file-mb" in msg
        listed = s.step({"tool": "list_files", "arguments": {}})["observation"]["text"]
        assert "big.txt" not in listed and s.state()["step_count"] == 1
        body = (
            b'{"action": {"tool": "write_file", "arguments": {"content": "'
            + b"y" * (3 * 1024 * 1024)
            + b'"}}}'
        )
        r = httpx.post(
            f"{url}/sessions/{s.id}/step",
            content=body,
            headers={"Authorization": f"Bearer {ALICE}", "Content-Type": "application/json"},
        )
        assert r.status_code == 413 and "cap" in r.json()["detail"]
        ok = s.step({"tool": "write_file", "arguments": {"path": "small.txt", "content": "hi"}})
        assert ok["observation"]["is_error"] is False
        c.close_sessions()


def test_the_clients_file_is_validated(tmp_path):
    from verigap.errors import VerigapError
    from verigap.server.cli import _load_clients

    good = tmp_path / "clients.json"
    good.write_text('{"a": {"token": "0123456789abcdef", "truth": true}}')
    assert _load_clients(good)["a"].truth is True
    for text, match in (
        ('{"a": {"token": "short"}}', "client 'a'"),
        (
            '{"a": {"token": "0123456789abcdef"}, "b": {"token": "0123456789abcdef"}}',
            "share a token",
        ),
        ("[1]", "expected"),
        ("{not json", "cannot read"),
    ):
        good.write_text(text)
        with pytest.raises(VerigapError, match=match):
            _load_clients(good)
