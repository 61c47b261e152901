"""verigap environments for the ``verifiers`` package (v1 API): a taskset plugin.

Point verifiers at a running ``verigap serve`` with ``--env.taskset.id verigap-verifiers``
(the ``verigap_verifiers`` package; or build :class:`VerigapConfig` in Python). Each task is one
reset of a served episode — a repo task, a Patch World program, a silent bug — played as text:
the engine plays the user, each turn shows the observation as JSON (and, on the first turn, the
action schema and the tools), the model answers with one JSON action, and the episode ends when
the server says ``done``. The trace records the reward the training signal saw
(``verigap_reward``) and, for a client allowed the truth, whether the episode was correct and
a false success (metrics ``correct``, ``false_success``), fetched per episode from the server.

The bridge talks OpenEnv's WebSocket protocol with openenv-core's own client; verifiers'
stock OpenEnv taskset reads a private attribute that openenv-core 0.3 does not have, and never
sees the truth, so this module carries its own ``Env``.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import verifiers.v1 as vf
from pydantic import Field
from verifiers.v1.tasksets.openenv.taskset import parse_action

FAMILIES = ("patchworld", "repo", "silentbug")


class VerigapData(vf.TaskData):
    base_url: str
    family: str
    config: dict[str, Any]
    reset: dict[str, Any]


class VerigapConfig(vf.TasksetConfig):
    base_url: str = "http://127.0.0.1:8000"
    """The server, with credentials as the URL's password: http://NAME:TOKEN@host:port."""
    family: str = "repo"
    """patchworld, repo or silentbug."""
    config: dict[str, Any] = Field(default_factory=dict)
    """The session config (e.g. {"k": 4} for Patch World, {"grader": "v2"} for repo)."""
    resets: list[dict[str, Any]] = Field(default_factory=lambda: [{}])
    """One task per reset, e.g. {"seed": 0, "options": {"task": "<task id>"}}."""


class VerigapTask(vf.Task[VerigapData]):
    pass


class VerigapTaskset(vf.Taskset[VerigapTask, VerigapConfig]):
    def load(self) -> Iterator[VerigapTask]:
        c = self.config
        if c.family not in FAMILIES:
            raise ValueError(f"family {c.family!r}: use one of {', '.join(FAMILIES)}")
        for i, reset in enumerate(c.resets):
            yield VerigapTask(
                VerigapData(
                    name=f"verigap/{c.family}#{i}",
                    prompt=None,
                    base_url=c.base_url,
                    family=c.family,
                    config=c.config,
                    reset=reset,
                ),
                c.task,
            )


class VerigapEnvConfig(vf.EnvConfig):
    player: vf.AgentConfig = vf.AgentConfig()


def observation_text(observation: dict[str, Any], first: bool, schema: dict[str, Any]) -> str:
    """One observation as the user's turn. Tool episodes show the tool's text; Patch World its
    arrays. The first turn adds the action schema (and the tools, for tool episodes)."""
    shown = {k: v for k, v in observation.items() if k not in ("tools", "metadata")}
    out = {"observation": shown}
    if first:
        out["action_schema"] = schema
        if observation.get("tools"):
            out["tools"] = observation["tools"]
        out["reply_with"] = "one JSON action object matching action_schema"
    return json.dumps(out, ensure_ascii=False)


class VerigapEnv(vf.Env[VerigapEnvConfig]):
    """Plays one served verigap episode per task with the player agent."""

    async def run(self, task: VerigapTask, agents: Any) -> None:
        from openenv.core import GenericEnvClient

        d = task.data
        base = d.base_url.rstrip("/")
        episode_id = f"verifiers-{uuid.uuid4().hex}"
        async with httpx.AsyncClient(timeout=30) as http:
            schema = (await http.get(f"{base}/envs/{d.family}/schema")).raise_for_status()
            action_schema = schema.json()["action"]
            async with GenericEnvClient(
                base_url=f"{base}/envs/{d.family}", message_timeout_s=3600
            ) as env:
                result = await env.reset(config=d.config, episode_id=episode_id, **d.reset)
                turn = observation_text(result.observation, True, action_schema)
                async with agents.player.interaction(task) as interaction:
                    while not result.done:
                        segment = await interaction.turn(turn)
                        if segment.terminated:
                            break
                        try:
                            action = parse_action(segment.last_reply, action_schema)
                            result = await env.step(action)
                            turn = observation_text(result.observation, False, action_schema)
                        except (ValueError, RuntimeError) as e:  # a bad action: say so, go on
                            turn = json.dumps(
                                {
                                    "error": str(e),
                                    "reply_with": "one JSON action object matching action_schema",
                                }
                            )
            trace = interaction.trace
            trace.record_reward(
                "verigap_reward", float(result.reward or 0.0) if result.done else 0.0
            )
            if result.done:
                truth = await http.get(f"{base}/episodes/{episode_id}/truth")
                if truth.status_code == 200:  # only for a client allowed the truth
                    verdicts = truth.json()["verdicts"]
                    correct = all(v["correct"] for v in verdicts)
                    passed = all(_passed(v) for v in verdicts)
                    trace.record_metric("correct", float(correct))
                    trace.record_metric("false_success", float(passed and not correct))


def _passed(verdict: dict[str, Any]) -> bool:
    from verigap.verdict import Verdict

    return Verdict.from_dict(verdict).passed


__all__ = [
    "VerigapConfig",
    "VerigapData",
    "VerigapEnv",
    "VerigapEnvConfig",
    "VerigapTask",
    "VerigapTaskset",
    "observation_text",
]
