"""The web-app feature tasks served: one task per episode, over the repo family's tool-call wire
types and tool loop (:class:`verigap.server._envs._ToolServed`).

A reset exports the task's base into the session's workspace and opens one persistent sandbox
for the episode's commands; the tools are the standard ones. A bad call comes back as an error
observation and the episode goes on. On ``submit`` (or when the budget is spent) the episode is
graded by :func:`verigap.repos.webfeatures.episode.grade`: the client sees the reward and the
visible suite's check; the hidden tests, the browser check and ``correct`` stay in the full
verdict (``/episodes/{id}/truth``).
"""

from __future__ import annotations

import functools
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import Field

from verigap.errors import ConfigError
from verigap.server._envs import _Opts, _reward_scheme, _ToolServed, parse_options
from verigap.server._models import Observation, ToolAction, ToolObservation
from verigap.server.families import EnvSpec, register
from verigap.verdict import Verdict


class WebAppConfig(_Opts):
    """A web-app session's payout: the workspace's own suite by default (any scheme
    ``verigap.rewards.parse_scheme`` reads: oracle pays the truth, audit:RATE audits it)."""

    reward: str = Field("visible", description="reward scheme: visible, oracle, audit:0.1, ...")


class WebAppReset(_Opts):
    task: str = Field(
        description="a web-app task id or commit prefix, e.g. flask-todolist-aa07ecfb "
        "(GET /envs lists them)"
    )


@functools.cache
def _tasks() -> dict[str, Any]:
    from verigap.repos.webfeatures.episode import load_tasks

    return load_tasks()


@dataclass
class WebAppServed(_ToolServed):
    """One web-app feature task per episode, graded on submit."""

    config: WebAppConfig = field(default_factory=WebAppConfig)
    name: str = "webapp"

    def __post_init__(self) -> None:
        self._scheme = _reward_scheme(self.config.reward)

    def reset(self, seed: int | None, options: dict[str, Any]) -> Observation:
        from verigap.agents import standard_tools
        from verigap.repos.webfeatures import build
        from verigap.repos.webfeatures.episode import SYSTEM, find_task, make_workspace
        from verigap.sandbox import Limits as BoxLimits
        from verigap.sandbox import make_sandbox

        o = parse_options(WebAppReset, options, "webapp reset options")
        try:
            self._task = find_task(o.task)
        except ConfigError as e:
            raise ConfigError(f"webapp reset options: {e}") from None
        self._seed = seed or 0
        self._ws = self._new_workspace()
        make_workspace(self._task, self._ws)
        self._ws.chmod(0o755)
        self._box = make_sandbox(
            self._ws,
            backend=self.backend,
            limits=BoxLimits(
                wall_s=self.command_timeout_s,
                file_size_mb=self.max_file_mb,
                memory_mb=build.BROWSER_MEMORY_MB,
            ),
            ro_binds=[Path(sys.prefix)],
            persistent=self.backend == "bwrap",
        )
        self.task_id = self._task.task_id
        obs = self._start(
            standard_tools(self._box), self._task.ticket, SYSTEM.format(python=sys.executable)
        )
        obs.metadata.update(layers=list(self._task.layers))
        return obs

    def _grade(self, episode: Any) -> Verdict:
        from verigap.repos.detect import transcript_commands
        from verigap.repos.webfeatures.episode import grade

        return grade(
            self._task,
            self._ws,
            commands=transcript_commands(self._transcript),
            scheme=self._scheme,
            rng=np.random.default_rng(self._seed),
            backend=self.backend,
        )


def _catalogue(settings: Any) -> dict[str, Any]:
    return {
        "tasks": sorted(_tasks()),
        "with_browser_check": sorted(i for i, t in _tasks().items() if t.browser_check),
    }


register(
    EnvSpec(
        "webapp",
        action=ToolAction,
        observation=ToolObservation,
        make=lambda ctx, cfg: WebAppServed(
            **ctx.common,
            **ctx.tool_settings,
            config=parse_options(WebAppConfig, cfg, "webapp session config"),
        ),
        description="a feature for a Flask web app (database, routes, pages) from a product "
        "owner's ticket; the truth is its real tests and a headless-browser check",
        catalogue=_catalogue,
    )
)
