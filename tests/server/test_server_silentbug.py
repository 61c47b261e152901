"""Silent-bug episodes over HTTP: the broken package as the workspace, the step budget, and the
stand-in grader (restored file = reward 1) with the truth kept server-side."""

from __future__ import annotations

import shutil

import pytest

from verigap.server import BackgroundServer, Client, RemoteToolEnv, ServerConfig
from verigap.silentbug.bank import load_registry
from verigap.silentbug.substrate import pristine_files

BUG = "single_gae_next_done"


def backend() -> str:
    return "bwrap" if shutil.which("bwrap") else "unsafe"


@pytest.fixture(scope="module")
def url(tmp_path_factory):
    config = ServerConfig(root=tmp_path_factory.mktemp("sb"), backend=backend(), max_steps=4)
    with BackgroundServer(config) as u:
        yield u


def test_fixing_the_bug_pays_and_leaving_it_does_not(url):
    bug = load_registry().get(BUG)
    path = f"substrates/{bug.file}"
    with Client(url) as c:
        env = RemoteToolEnv(c, "silentbug")
        prompt, info = env.reset(seed=0, options={"bug": BUG})
        assert bug.substrate in prompt and {t["name"] for t in info["tools"]} >= {"submit", "run"}
        text, reward, terminated, truncated, step_info = env.step(
            {"tool": "read_file", "arguments": {"path": path}})
        assert not terminated and not step_info["is_error"]
        assert text != pristine_files()[bug.file]  # the workspace holds the broken code
        _, _, _, _, bad = env.step({"tool": "read_file", "arguments": {"nope": 1}})
        assert bad["is_error"]  # a bad tool call is an error observation; the episode goes on
        env.step({"tool": "write_file", "arguments": {"path": path,
                                                       "content": pristine_files()[bug.file]}})
        _, reward, terminated, truncated, end = env.step({"tool": "submit",
                                                          "arguments": {"summary": "fixed"}})
        assert (reward, terminated, truncated) == (1.0, True, False)
        assert end["verdict"] == {"task_id": BUG, "reward": 1.0, "passed": True,
                                  "checks": {"build": True, "visible": True}}

        prompt, _ = env.reset(seed=0, options={"bug": BUG})
        _, reward, terminated, _, end = env.step({"tool": "submit", "arguments": {}})
        assert (reward, terminated, end["verdict"]["passed"]) == (0.0, True, False)
        env.close()


def test_the_step_budget_ends_and_grades_the_episode(url):
    with Client(url) as c:
        env = RemoteToolEnv(c, "silentbug", max_steps=2)
        env.reset(options={"bug": BUG})
        assert env.session.state()["max_steps"] == 2
        out = env.step({"tool": "list_files", "arguments": {}})
        assert out[2:4] == (False, False)
        _, reward, terminated, truncated, info = env.step({"tool": "list_files", "arguments": {}})
        assert (reward, terminated, truncated) == (0.0, False, True)
        assert info["ended"] == "step budget spent (2 steps)" and info["verdict"]["reward"] == 0.0
        env.close()


def test_the_wall_clock_budget_ends_and_grades_the_episode(url):
    """A microsecond budget is spent before any request can arrive."""
    with Client(url) as c:
        env = RemoteToolEnv(c, "silentbug", wall_s=1e-6)
        env.reset(options={"bug": BUG})
        _, reward, terminated, truncated, info = env.step({"tool": "list_files", "arguments": {}})
        assert (reward, terminated, truncated) == (0.0, False, True)
        assert info["ended"].startswith("wall-clock budget spent")
        env.close()
