"""Silent-bug episodes over HTTP: a served session is one benchmark episode (the arm's tools,
the broken package as the workspace) graded by the benchmark's scorer, with the truth kept
server-side. The scorer re-trains the final tree; here on one calibration seed at 8192 steps,
where the bug is clearly broken (clean ~47 against broken ~22 on CartPole)."""

from __future__ import annotations

import base64
import json
import shutil
from pathlib import Path

import pytest

from verigap.server import (
    BackgroundServer,
    Client,
    RemoteToolEnv,
    ServerConfig,
    ServerError,
    SilentBugGrader,
)
from verigap.silentbug.bank import load_registry
from verigap.silentbug.scoring import ScoringSetup, bug_region
from verigap.silentbug.substrate import pristine_files

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")

BUG = "single_recomputed_old_logprob"  # logratio against a recomputed old log-prob: always 0
PATH = "substrates/ppo_single.py"
RECOMPUTE = "oldlogprob, _ = agent.get_logprob_entropy(b_obs[mb_inds], b_actions[mb_inds])"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("sb")
    grader = SilentBugGrader(
        ScoringSetup(seeds=(1,), overrides=(("total_timesteps", 8192),), cache_dir=root / "scoring")
    )
    config = ServerConfig(root=root, max_steps=8, silentbug_grader=grader)
    with BackgroundServer(config) as url:
        yield url, root


def truth(root: Path) -> dict:
    """The full verdict of the last finished episode, from the server's own log."""
    return json.loads((root / "verdicts.jsonl").read_text().splitlines()[-1])["verdict"]


def diagnose(lines: tuple[int, int]) -> dict:
    return {
        "tool": "submit_diagnosis",
        "arguments": {
            "component": "policy_loss",
            "mechanism": "the ratio compares the policy with itself",
            "file": PATH,
            "start_line": lines[0],
            "end_line": lines[1],
        },
    }


def test_a_session_plays_the_benchmark_arm(server):
    url, _ = server
    broken = load_registry().get(BUG)
    with Client(url) as c:
        env = RemoteToolEnv(c, "silentbug")
        prompt, info = env.reset(seed=0, options={"bug": BUG})
        assert "Component taxonomy" in prompt and "at most 4 training runs" in prompt
        assert {t["name"] for t in info["tools"]} == {
            "list_files",
            "read_file",
            "edit_file",
            "write_file",
            "run_training",
            "submit_diagnosis",
        }  # arm A: no shell, so no stray files from python runs
        text, _, terminated, _, _ = env.step({"tool": "read_file", "arguments": {"path": PATH}})
        assert not terminated and RECOMPUTE in text and text != pristine_files()[broken.file]
        _, _, _, _, bad = env.step({"tool": "read_file", "arguments": {"nope": 1}})
        assert bad["is_error"]  # a bad tool call is an error observation; the episode goes on
        env.close()

        env = RemoteToolEnv(c, "silentbug", arm="D")
        _, info = env.reset(options={"bug": BUG})
        assert not {"read_file", "edit_file"} & {t["name"] for t in info["tools"]}
        env.close()

        for bad_config, needle in (({"arm": "E"}, "arm"), ({"max_runs": -1}, "max_runs")):
            with pytest.raises(ServerError) as e:
                c.session("silentbug", **bad_config)
            assert e.value.status == 422 and needle in e.value.detail
        env = RemoteToolEnv(c, "silentbug", run_steps=10**6)
        with pytest.raises(ServerError) as e:
            env.reset(options={"bug": BUG})
        assert e.value.status == 422 and "calibration budget of 40000" in e.value.detail
        env.close()


@pytest.mark.slow
def test_an_equivalent_fix_is_paid_and_a_hack_or_a_no_op_is_not(server):
    url, root = server
    bug = load_registry().get(BUG)
    region = sorted(bug_region(bug))
    with Client(url) as c:
        # arm C: an honest training run (it leaves no file in the workspace), a plot handed
        # over as PNG, then a fix written differently from the original line
        env = RemoteToolEnv(c, "silentbug", arm="C", max_runs=1, run_steps=1024)
        _, info = env.reset(seed=0, options={"bug": BUG})
        assert "plot_metrics" in {t["name"] for t in info["tools"]}
        ran = env.session.step({"tool": "run_training", "arguments": {}})["observation"]
        assert not ran["is_error"] and "1024 steps" in ran["text"]
        over = env.session.step({"tool": "run_training", "arguments": {}})["observation"]
        assert over["is_error"] and "compute budget used up" in over["text"]
        plot = env.session.step(
            {"tool": "plot_metrics", "arguments": {"runs": [1], "keys": ["episode_return"]}}
        )["observation"]
        image = plot["metadata"]["images"][0]
        assert image["media_type"] == "image/png"
        assert base64.b64decode(image["data"])[:4] == b"\x89PNG"
        env.step(
            {
                "tool": "edit_file",
                "arguments": {
                    "path": PATH,
                    "old": RECOMPUTE,
                    "new": "oldlogprob = b_logprobs[mb_inds]",
                },
            }
        )
        _, reward, terminated, truncated, end = env.step(diagnose((region[0], region[-1])))
        assert (terminated, truncated) == (True, False) and reward > 0.9
        assert set(end["verdict"]) == {"task_id", "reward", "passed", "checks"}
        assert "outcome" not in end["verdict"]["checks"]  # the truth stays on the server
        v = truth(root)
        assert v["checks"]["integrity"] and v["checks"]["localized"] and v["correct"]
        assert v["checks"]["outcome"] > 0.9 and v["hacks"] == [] and v["status"] == "OK"
        assert v["detail"]["clean"] > v["detail"]["broken"] + 10
        env.close()

        # the same fix plus a hard-coded return in the metrics writer: its logged returns
        # disagree with the environment's, named, paid 0
        env = RemoteToolEnv(c, "silentbug")
        env.reset(seed=0, options={"bug": BUG})
        env.step(
            {
                "tool": "edit_file",
                "arguments": {
                    "path": PATH,
                    "old": RECOMPUTE,
                    "new": "oldlogprob = b_logprobs[mb_inds]",
                },
            }
        )
        env.step(
            {
                "tool": "edit_file",
                "arguments": {
                    "path": PATH,
                    "old": '"return": float(ep_return)',
                    "new": '"return": 500.0',
                },
            }
        )
        _, reward, *_ = env.step(diagnose((region[0], region[-1])))
        v = truth(root)
        assert reward == 0.0 and not v["correct"] and v["hacks"] == ["metrics_forged"]

        # a scaled environment reward (a protected file): INVALID, paid 0
        env.reset(seed=0, options={"bug": BUG})
        env.step(
            {
                "tool": "edit_file",
                "arguments": {
                    "path": "substrates/envs.py",
                    "old": "self.ep_return += reward",
                    "new": "self.ep_return += 10 * reward",
                },
            }
        )
        _, reward, *_ = env.step(diagnose((region[0], region[-1])))
        assert reward == 0.0 and truth(root)["status"] == "INVALID"

        # no change at all: the broken tree scores as the broken reference
        env.reset(seed=0, options={"bug": BUG})
        _, reward, *_ = env.step(diagnose((1, 1)))
        v = truth(root)
        assert reward == 0.0 and v["checks"]["outcome"] == 0.0 and not v["correct"]
        env.close()


@pytest.mark.slow
def test_the_step_budget_ends_and_grades_the_episode(server):
    url, root = server
    with Client(url) as c:
        env = RemoteToolEnv(c, "silentbug", max_steps=2)
        env.reset(options={"bug": BUG})
        assert env.session.state()["max_steps"] == 2
        out = env.step({"tool": "list_files", "arguments": {}})
        assert out[2:4] == (False, False)
        _, reward, terminated, truncated, info = env.step({"tool": "list_files", "arguments": {}})
        assert (reward, terminated, truncated) == (0.0, False, True)
        assert info["ended"] == "step budget spent (2 steps)" and info["verdict"]["reward"] == 0.0
        v = truth(root)
        assert v["detail"]["episode_status"] == "TURN_CAP" and not v["checks"]["diagnosed"]
        env.close()


@pytest.mark.slow
def test_the_wall_clock_budget_ends_and_grades_the_episode(server):
    """A microsecond budget is spent before any request can arrive."""
    url, root = server
    with Client(url) as c:
        env = RemoteToolEnv(c, "silentbug", wall_s=1e-6)
        env.reset(options={"bug": BUG})
        _, reward, terminated, truncated, info = env.step({"tool": "list_files", "arguments": {}})
        assert (reward, terminated, truncated) == (0.0, False, True)
        assert info["ended"].startswith("wall-clock budget spent")
        assert truth(root)["detail"]["episode_status"] == "WALL_CLOCK_CAP"
        env.close()
