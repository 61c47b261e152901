"""The workplace family over HTTP, played with openenv-core's own client: the scripted
reconciler's tool calls go over the WebSocket and earn the same verdict as in process; the
client sees the reward, the reviewer items and the facts surfaced, and the truth only through
``/episodes/{id}/truth``; a bad call is an error observation."""

from __future__ import annotations

import shutil
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import pytest
from served_family import env_client, episode_truth, serving

from verigap.workplace import project_tree
from verigap.workplace._items import find_item
from verigap.workplace.agents import change_files, decide, run_agent

pytest.importorskip("openenv.core")

pytestmark = pytest.mark.skipif(
    shutil.which("bwrap") is None, reason="code tasks are graded in bubblewrap sandboxes"
)

TOKEN = "workplace-test-token-0123"
PROBE = "textkit/s0/slugify.sep/probe_value"
CODE = "textkit/s0/slugify.sep/code"


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    with serving(tmp_path_factory.mktemp("wp-server"), TOKEN) as url:
        yield url


def client(url: str) -> Any:
    return env_client(url, TOKEN, "workplace")


def truth(url: str, episode_id: str) -> dict[str, Any]:
    return episode_truth(url, TOKEN, episode_id)


class _Remote:
    """The scripted agents' session (``call(name, **args) -> text``) over the client; ``env``
    gives them the item and, for a code task, a local copy of the same project to read."""

    def __init__(self, client: Any, item: Any, ws: Path | None = None) -> None:
        self.client, self.seen, self.last = client, [], None
        self.env = SimpleNamespace(item=item, ws=ws)

    def call(self, name: str, **args: Any) -> str:
        self.last = self.client.step({"tool": name, "arguments": args})
        self.seen.append(self.last.observation["text"])
        return self.last.observation["text"]


def test_a_probe_played_over_the_socket_earns_the_in_process_verdict(served, tmp_path):
    item = find_item(PROBE)
    local = run_agent("reconciler", item, tmp_path / "local")
    with client(served) as env:
        first = env.reset(seed=0, episode_id="wp-probe-1", options={"item": PROBE})
        assert first.observation["kind"] == "probe_value"
        assert {"search_chat", "read_ticket", "git_log", "answer"} <= {
            t["name"] for t in first.observation["tools"]
        }
        s = _Remote(env, item)
        belief = decide("reconciler", s, item)
        end = s.call("answer", answer=repr(belief["value"])) and s.last
        assert end.done is True and end.reward == local.reward == 1.0
        public = end.observation["verdict"]
        assert "correct" not in public and "answer" not in public["checks"]
        assert public["facts_consulted"] == sorted(local.detail["facts_consulted"])
        assert public["consulted_all_needed"] is True
        with pytest.raises(RuntimeError, match="episode is over"):
            env.step({"tool": "search_chat", "arguments": {"query": "slugify"}})
    full = truth(served, "wp-probe-1")
    assert full["correct"] is True and full["reward"] == 1.0
    assert full["detail"]["matched"] == "final"
    assert set(item.needed_facts) <= set(full["detail"]["facts_consulted"])


def test_a_wrong_answer_is_paid_nothing_and_its_facts_are_reported(served):
    with client(served) as env:
        env.reset(seed=0, episode_id="wp-probe-2", options={"item": PROBE})
        end = env.step({"tool": "answer", "arguments": {"answer": "'?'"}})
        assert end.done is True and end.reward == 0.0
        assert end.observation["verdict"]["facts_consulted"] == []
        assert end.observation["verdict"]["consulted_all_needed"] is False
    assert truth(served, "wp-probe-2")["correct"] is False


def test_bad_calls_are_error_observations_and_the_episode_goes_on(served):
    with client(served) as env:
        env.reset(seed=0, options={"item": PROBE})
        unknown = env.step({"tool": "delete_everything", "arguments": {}})
        assert unknown.observation["is_error"] and "no tool" in unknown.observation["text"]
        bad = env.step({"tool": "read_ticket", "arguments": {"id": 3}})  # wrong argument name
        assert bad.observation["is_error"] and bad.done is False
        missing = env.step({"tool": "read_ticket", "arguments": {"ticket_id": "WP-999"}})
        assert missing.observation["is_error"] and missing.done is False
        ok = env.step({"tool": "list_tickets", "arguments": {}})
        assert not ok.observation["is_error"] and "WP-" in ok.observation["text"]
        assert env.state()["step_count"] == 4 and env.state()["task_id"] == PROBE
        with pytest.raises(RuntimeError, match="PROJECT/sSEED"):
            env.reset(seed=0, options={"item": "textkit-slugify"})
        with pytest.raises(RuntimeError, match="accepted fields: item"):
            env.reset(seed=0, options={"task": PROBE})


def _code_episode(url: str, episode_id: str, flaw: str | None, tmp: Path) -> Any:
    """The reconciler's decision over the socket, then a control's files written by calls."""
    item = find_item(CODE)
    ws = tmp / "project"
    shutil.copytree(project_tree(item.project), ws)
    with client(url) as env:
        env.reset(seed=0, episode_id=episode_id, options={"item": CODE})
        s = _Remote(env, item, ws)
        value = decide("reconciler", s, item)["value"]
        for path, text in change_files(item, ws, value, flaw).items():
            assert not s.call("write_file", path=path, content=text).startswith("error")
        s.call("submit", summary="default changed as decided")
        return s.last


def test_a_careful_code_change_over_the_socket_passes_tests_and_review(served, tmp_path):
    end = _code_episode(served, "wp-code-careful", None, tmp_path)
    public = end.observation["verdict"]
    assert end.done is True and end.reward == 1.0
    assert public["checks"]["visible"] is True and "hidden" not in public["checks"]
    assert all(v for k, v in public["checks"].items() if k.startswith("review."))
    full = truth(served, "wp-code-careful")
    assert full["correct"] is True and full["checks"]["hidden"] is True


def test_a_sloppy_code_change_is_paid_by_tests_and_caught_by_the_reviewer_item(served, tmp_path):
    end = _code_episode(served, "wp-code-sloppy", "debug_print", tmp_path)
    checks = end.observation["verdict"]["checks"]
    assert end.reward == 1.0 and checks["visible"] is True  # the tests alone pay it
    assert checks["review.no_debug_leftovers"] is False
    assert truth(served, "wp-code-sloppy")["detail"]["review_failed"] == ["no_debug_leftovers"]


def test_a_review_penalty_session_pays_the_sloppy_change_less(served, tmp_path):
    item = find_item(CODE)
    ws = tmp_path / "project"
    shutil.copytree(project_tree(item.project), ws)
    with client(served) as env:
        env.reset(seed=0, config={"reward": "review:0.5"}, options={"item": CODE})
        value = item.scenario.values["final"]
        for path, text in change_files(item, ws, value, "debug_print").items():
            env.step({"tool": "write_file", "arguments": {"path": path, "content": text}})
        end = env.step({"tool": "submit", "arguments": {"summary": "done"}})
        checks = end.observation["verdict"]["checks"]
        assert checks["visible"] is True and checks["review.no_debug_leftovers"] is False
        assert end.done is True and end.reward == 0.5  # the test's 1 less one failed item


def test_the_catalogue_schema_and_stateless_reset_know_the_workplace(served):
    http = httpx.Client(base_url=served, headers={"Authorization": f"Bearer {TOKEN}"})
    wp = http.get("/envs").json()["workplace"]
    assert "code" in wp["kinds"] and "textkit" in wp["projects"]
    schema = http.get("/envs/workplace/schema").json()
    assert (
        "kind" in schema["observation"]["properties"] and "tool" in schema["action"]["properties"]
    )
    assert http.get("/envs/workplace/metadata").json()["name"] == "verigap/workplace"
    r = http.post("/envs/workplace/reset", json={"seed": 0, "options": {"item": PROBE}})
    assert r.status_code == 200 and r.json()["observation"]["kind"] == "probe_value"
    r = http.post("/envs/workplace/reset", json={"seed": 0, "options": {"item": "x/s0/y.z/code"}})
    assert r.status_code == 422 and "no project 'x'" in r.json()["detail"]
