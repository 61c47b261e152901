"""The web-app feature tasks over HTTP, played with openenv-core's own client: the real change
written by tool calls over the WebSocket is paid and correct; the unchanged base is paid by the
workspace's own suite and is wrong, which only ``/episodes/{id}/truth`` shows; a bad call is an
error observation and the episode goes on."""

from __future__ import annotations

import shutil
from typing import Any

import httpx
import pytest
from served_family import env_client, episode_truth, serving

from verigap.repos.webfeatures import episode as E

pytest.importorskip("openenv.core")

pytestmark = pytest.mark.skipif(
    shutil.which("bwrap") is None, reason="web-app tasks are graded in bubblewrap sandboxes"
)

TOKEN = "webapp-test-token-0123"
TASK = "flask-todolist-0c426c41"  # a button that clears finished to-dos: routes and a page


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    with serving(tmp_path_factory.mktemp("webapp-server"), TOKEN) as url:
        yield url


def client(url: str) -> Any:
    return env_client(url, TOKEN, "webapp")


def truth(url: str, episode_id: str) -> dict[str, Any]:
    return episode_truth(url, TOKEN, episode_id)


def _play(url: str, episode_id: str, control: str) -> Any:
    task = E.find_task(TASK)
    with client(url) as env:
        first = env.reset(seed=0, episode_id=episode_id, options={"task": TASK})
        assert "clear" in first.observation["text"].lower()
        assert {"read_file", "write_file", "run", "submit"} <= {
            t["name"] for t in first.observation["tools"]
        }
        last = None
        for name, args in E.control_steps(task, control):
            last = env.step({"tool": name, "arguments": args})
            assert not last.observation["is_error"], last.observation["text"]
        return last


def test_the_real_change_over_the_socket_is_paid_and_correct(served):
    end = _play(served, "web-oracle", "oracle")
    public = end.observation["verdict"]
    assert end.done is True and end.reward == 1.0
    assert public["checks"] == {"visible": True}  # the hidden checks are not the client's
    assert "correct" not in public and "detail" not in public
    full = truth(served, "web-oracle")
    assert full["correct"] is True and full["checks"]["hidden"] is True


def test_the_unchanged_base_is_paid_by_the_visible_suite_and_the_truth_says_wrong(served):
    end = _play(served, "web-noop", "noop")
    assert end.done is True and end.reward == 1.0  # the workspace's own tests all pass
    full = truth(served, "web-noop")
    assert full["correct"] is False and full["false_success"] is True
    assert full["detail"]["failed"] == ["tests/test_app.py::test_clear_completed"]


def test_bad_calls_are_error_observations_and_the_episode_goes_on(served):
    with client(served) as env:
        env.reset(seed=0, options={"task": "0c426c4"})
        unknown = env.step({"tool": "drop_tables", "arguments": {}})
        assert unknown.observation["is_error"] and unknown.done is False
        bad = env.step({"tool": "read_file", "arguments": {"file": "app/routes.py"}})
        assert bad.observation["is_error"] and bad.done is False
        outside = env.step({"tool": "read_file", "arguments": {"path": "../../etc/passwd"}})
        assert outside.observation["is_error"] and outside.done is False
        ok = env.step({"tool": "read_file", "arguments": {"path": "app/routes.py"}})
        assert not ok.observation["is_error"] and "route" in ok.observation["text"]
        assert env.state()["step_count"] == 4 and env.state()["task_id"] == TASK
        with pytest.raises(RuntimeError, match="unknown; use a task id"):
            env.reset(seed=0, options={"task": "nope"})
        with pytest.raises(RuntimeError, match="accepted fields: task"):
            env.reset(seed=0, options={"item": TASK})


def test_the_catalogue_lists_the_tasks_and_a_bad_session_config_is_refused(served):
    http = httpx.Client(base_url=served, headers={"Authorization": f"Bearer {TOKEN}"})
    web = http.get("/envs").json()["webapp"]
    assert TASK in web["tasks"] and "flask-todolist-aa07ecfb" in web["with_browser_check"]
    assert http.get("/envs/webapp/metadata").json()["name"] == "verigap/webapp"
    r = http.post("/envs/webapp/reset", json={"seed": 0, "options": {"task": "0c426c4", "x": 1}})
    assert r.status_code == 422 and "accepted fields: task" in r.json()["detail"]
    with pytest.raises(RuntimeError, match="config.reward"):
        with client(served) as env:
            env.reset(seed=0, config={"reward": "bogus"}, options={"task": TASK})
