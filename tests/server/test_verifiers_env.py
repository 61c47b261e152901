"""verigap as a ``verifiers`` environment: loaded by verifiers' own loader from the taskset id,
its episodes played as text against a real server by a scripted player (verifiers' rollouts
need a model endpoint; the player here answers each turn from a script, through the same
``interaction.turn`` / ``Segment`` interface), with the reward and the truth on the trace."""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil

import pytest

vf = pytest.importorskip("verifiers.v1")
pytest.importorskip("openenv.core")

from verifiers.v1.utils.loaders import load_environment  # noqa: E402

from verigap.server import BackgroundServer, ServerConfig  # noqa: E402
from verigap.server.verifiers_env import VerigapConfig, VerigapEnvConfig  # noqa: E402

TOKEN = "verifiers-test-token-01"


def backend() -> str:
    return "bwrap" if shutil.which("bwrap") else "unsafe"


class ScriptedPlayer:
    """Answers each turn with the next scripted reply; keeps what it was shown."""

    def __init__(self, replies: list[str]) -> None:
        self.replies, self.seen = list(replies), []
        self.trace = vf.Trace.model_construct()  # the real record; no task or agent needed

    @contextlib.asynccontextmanager
    async def interaction(self, task):
        yield self

    async def turn(self, text: str) -> vf.Segment:
        self.seen.append(json.loads(text))
        if not self.replies:
            return vf.Segment(messages=[], terminated=True)
        return vf.Segment(messages=[], root_reply=self.replies.pop(0))


class Agents:
    def __init__(self, player: ScriptedPlayer) -> None:
        self.player = player


@pytest.fixture(scope="module")
def url(repo_task_dir, tmp_path_factory):
    config = ServerConfig.with_tasks_from(
        repo_task_dir,
        root=tmp_path_factory.mktemp("vf"),
        backend=backend(),
        clients={"rl": {"token": TOKEN, "truth": True}},
    )
    with BackgroundServer(config) as u:
        yield u.replace("http://", f"http://rl:{TOKEN}@"), sorted(config.tasks)[0]


def play(url: str, family: str, config: dict, reset: dict, replies: list[str]) -> ScriptedPlayer:
    env = load_environment(
        VerigapEnvConfig(
            taskset=VerigapConfig(
                id="verigap-verifiers", base_url=url, family=family, config=config, resets=[reset]
            )
        )
    )
    (task,) = list(env.taskset.load())
    player = ScriptedPlayer(replies)
    asyncio.run(env.run(task, Agents(player)))
    return player


def test_a_patchworld_episode_as_text(url):
    replies = ['```json\n{"actions": [33]}\n```', "not json at all", '{"actions": [33]}']
    p = play(url[0], "patchworld", {"k": 2}, {"seed": 0}, replies)
    first = p.seen[0]
    assert "actions" in first["action_schema"]["properties"]
    assert len(first["observation"]["values"][0]) == 12
    assert "error" in p.seen[2]  # the bad reply came back as an error turn; the episode went on
    assert p.trace.rewards["verigap_reward"].score == 0.0  # deleting fails the visible checks
    assert p.trace.metrics["correct"] == 0.0 and p.trace.metrics["false_success"] == 0.0


def test_a_repo_episode_as_text_records_the_truth(url):
    base, task = url
    replies = [
        json.dumps({"tool": "list_files", "arguments": {}}),
        json.dumps({"tool": "submit", "arguments": {"summary": "nothing changed"}}),
    ]
    p = play(base, "repo", {}, {"seed": 0, "options": {"task": task}}, replies)
    assert {t["name"] for t in p.seen[0]["tools"]} >= {"run", "submit", "write_file"}
    assert p.seen[0]["observation"]["text"]  # the task prompt
    assert p.trace.rewards["verigap_reward"].score == 0.0
    assert p.trace.metrics["correct"] == 0.0
