"""The workplace family served: one task or probe per episode, over the same tool-call wire
types as the repo and silent-bug families.

The episode is a :class:`verigap.workplace.WorkplaceEnv` (its tools: chat, tickets, pull
requests and git history, plus ``answer`` for a probe or the workspace tools for a code task).
A bad call comes back as an error observation and the episode goes on. The episode ends at
``answer``/``submit`` or when the session's budget is spent (then it is graded as it stands).
The client sees the reward, the visible checks, the reviewer rubric's ``review.*`` items (a
reward scheme may pay on them) and which needed facts its calls surfaced; whether the change
or answer is correct stays in the full verdict (``/episodes/{id}/truth``).
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from typing import Any

from pydantic import Field

from verigap.errors import ConfigError
from verigap.server._envs import (
    EpisodeStateError,
    ServedEnv,
    _Opts,
    _reward_scheme,
    parse_options,
    public_verdict,
)
from verigap.server._models import Action, Observation, ToolAction, ToolObservation
from verigap.server.families import EnvSpec, register
from verigap.verdict import Verdict


class WorkplaceConfig(_Opts):
    """A workplace session's payout: the visible tests by default (``review`` subtracts a cost
    per failed reviewer item; any scheme ``verigap.rewards.parse_scheme`` reads)."""

    reward: str = Field("visible", description="reward scheme: visible, review:0.25, oracle, ...")


class WorkplaceReset(_Opts):
    item: str = Field(
        description="an item id, PROJECT/sSEED/FUNC.PARAM/KIND, e.g. "
        "textkit/s0/slugify.sep/probe_value (GET /envs shows the projects and kinds)"
    )


class WorkplaceObservation(ToolObservation):
    """A tool's text (or the prompt on reset, with the tool schemas), and the item's kind."""

    kind: str | None = None


def public_workplace_verdict(v: Verdict) -> dict[str, Any]:
    """What the client sees: the reward, the visible checks, the reviewer items (reward terms)
    and the facts its calls surfaced; never ``correct``, the hidden run or the answer's match."""
    out = public_verdict(v)
    out["checks"].update({k: bool(x) for k, x in v.checks.items() if k.startswith("review.")})
    out["facts_needed"] = list(v.detail.get("facts_needed", []))
    out["facts_consulted"] = sorted(v.detail.get("facts_consulted", {}))
    out["consulted_all_needed"] = bool(v.detail.get("consulted_all_needed", False))
    return out


@dataclass
class WorkplaceServed(ServedEnv):
    """A ``WorkplaceEnv`` per episode, in the session's directory."""

    config: WorkplaceConfig = field(default_factory=WorkplaceConfig)
    backend: str = "bwrap"
    name: str = "workplace"
    action_model: type[Action] = ToolAction
    _env: Any = None

    def __post_init__(self) -> None:
        self._scheme = _reward_scheme(self.config.reward)

    def reset(self, seed: int | None, options: dict[str, Any]) -> Observation:
        from verigap.workplace import WorkplaceEnv
        from verigap.workplace._items import find_item

        o = parse_options(WorkplaceReset, options, "workplace reset options")
        try:
            item = find_item(o.item)
        except ConfigError as e:
            raise ConfigError(f"workplace reset options: {e}") from None
        if self._env is not None:
            self._env.close()
        self._env = WorkplaceEnv(
            item, self.workdir / "episode", backend=self.backend, scheme=self._scheme
        )
        prompt, info = self._env.reset(seed=seed)
        self.task_id = item.item_id
        self._begin()
        return WorkplaceObservation(
            text=prompt,
            kind=item.kind,
            metadata={"item_id": item.item_id},
            tools=[dataclasses.asdict(t.spec) for t in self._env.tools],
        )

    def tool_specs(self) -> list[dict[str, Any]]:
        """The episode's tools in MCP's shape (name, description, input_schema)."""
        if not self.started:
            raise EpisodeStateError("no episode yet: reset first, then list the tools")
        return [
            {
                "name": t.spec.name,
                "description": t.spec.description,
                "input_schema": t.spec.parameters,
            }
            for t in self._env.tools
        ]

    def step(self, action: Action, timeout_s: float | None = None) -> Observation:
        assert isinstance(action, ToolAction)
        text, _, ended, _, info = self._env.step(
            {"name": action.tool, "arguments": dict(action.arguments)}
        )
        self.step_count += 1
        is_error = bool(info.get("is_error"))
        reason = "submitted" if ended else None
        if reason is None and self.step_count >= self.limits.max_steps:
            reason = f"step budget spent ({self.limits.max_steps} steps)"
        elif reason is None and time.monotonic() >= self.deadline:
            reason = f"wall-clock budget spent ({self.limits.wall_s:g} s)"
        if reason is None:
            return WorkplaceObservation(text=text, is_error=is_error, kind=self._env.item.kind)
        self.done = True
        verdict = self._env.verdict if ended else self._env.grade()
        self._env.close()  # stop the code task's sandbox; the verdict is taken
        self.verdicts = [verdict.to_dict()]
        public = self.verdicts[0] if self.reveal_truth else public_workplace_verdict(verdict)
        return WorkplaceObservation(
            text=text,
            is_error=is_error,
            kind=self._env.item.kind,
            done=True,
            reward=float(verdict.reward),
            verdict=public,
            metadata={"ended": reason},
        )

    def close(self) -> None:
        if self._env is not None:
            self._env.close()
        super().close()


def _catalogue(settings: Any) -> dict[str, Any]:
    from verigap.workplace import KINDS, PROJECTS

    return {
        "item_ids": "PROJECT/sSEED/FUNC.PARAM/KIND",
        "projects": sorted(PROJECTS),
        "kinds": list(KINDS),
    }


register(
    EnvSpec(
        "workplace",
        action=ToolAction,
        observation=WorkplaceObservation,
        make=lambda ctx, cfg: WorkplaceServed(
            **ctx.common,
            backend=ctx.settings.backend,
            config=parse_options(WorkplaceConfig, cfg, "workplace session config"),
        ),
        description="a task or question whose facts are spread over tickets, chat, pull "
        "requests and git history; code graded by tests and the reviewer rubric",
        catalogue=_catalogue,
    )
)
