"""Wire types: what crosses the HTTP boundary, as strict pydantic models.

They follow OpenEnv's JSON conventions (``openenv.core.env_server.types``): an ``Action`` and an
``Observation`` carry ``metadata``; an observation carries ``done`` and ``reward``; a step or
reset answers ``{"observation": ..., "reward": ..., "done": ...}``; ``State`` has
``episode_id`` and ``step_count``. We define them here rather than import ``openenv-core``
because its 0.2 releases pull in its whole server stack (and pin its own FastAPI/MCP versions),
and its server holds one environment per app, while ours serves three families from one
process with per-session sandboxes, budgets and a bearer token. The JSON is the same shape, so an
OpenEnv-style client can read it.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field


def _registered(env: str) -> str:
    from verigap.server.families import known

    return known(env)


EnvName = Annotated[str, AfterValidator(_registered)]
"""A registered family's id (``verigap.server.families``)."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Action(_Strict):
    """Base action (OpenEnv: ``metadata`` on every action)."""

    metadata: dict[str, Any] = Field(default_factory=dict)


class PatchWorldAction(Action):
    """One action per program of the session's batch: 0..31 write a value, 32 stub, 33 delete."""

    actions: list[int] = Field(min_length=1)


class ToolAction(Action):
    """One tool call in a repo, silent-bug or workplace episode (list_files, read_file,
    edit_file, write_file, run, submit, report_impossible; the workplace's search_chat,
    read_ticket, git_log, answer, ...)."""

    tool: str = Field(min_length=1)
    arguments: dict[str, Any] = Field(default_factory=dict)


class Observation(_Strict):
    """Base observation (OpenEnv: ``done``, ``reward``, ``metadata``). ``verdict`` arrives when
    the episode ends: the reward and the visible checks, never the truth unless the operator
    started the server with ``--reveal-truth``."""

    done: bool = False
    reward: float | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    verdict: dict[str, Any] | list[dict[str, Any]] | None = None


class PatchWorldObservation(Observation):
    """(B, 12) arrays as nested lists, and the branch each program acts on next."""

    values: list[list[int]]
    broken: list[list[int]]
    tested: list[list[int]]
    strict: list[list[int]]
    written: list[list[int]]
    target: list[int]
    rewards: list[float] | None = None  # per program, on the last step


class ToolObservation(Observation):
    """The text a tool returned (or the task prompt on reset, with the tool schemas)."""

    text: str
    is_error: bool = False
    tools: list[dict[str, Any]] | None = None


class State(BaseModel):
    """OpenEnv's state: ``episode_id`` and ``step_count``, plus what a trainer needs to know
    about its session's budget."""

    model_config = ConfigDict(extra="forbid")

    episode_id: str | None = None
    step_count: int = 0
    env: EnvName
    session_id: str
    done: bool = False
    max_steps: int
    wall_s_left: float | None = None
    task_id: str | None = None


class CreateSession(_Strict):
    """``POST /sessions``: which environment, and its fixed settings for this session."""

    env: EnvName
    config: dict[str, Any] = Field(default_factory=dict)


class SessionInfo(_Strict):
    session_id: str
    env: EnvName
    owner: str
    action_schema: dict[str, Any]


class ResetRequest(_Strict):
    """OpenEnv's reset body (``seed``, ``episode_id``) plus Gymnasium-style ``options``."""

    seed: int | None = Field(None, ge=0)
    episode_id: str | None = Field(None, max_length=255)
    options: dict[str, Any] = Field(default_factory=dict)


class StepRequest(_Strict):
    """OpenEnv's step body: the action as a JSON object, an optional per-step timeout and a
    request id (a step retried with the same id answers the first result, never steps twice)."""

    action: dict[str, Any]
    timeout_s: float | None = Field(None, gt=0, description="cap on this step's command time")
    request_id: str | None = Field(None, max_length=255)


class StepResult(_Strict):
    """What reset and step answer (OpenEnv's ``StepResult``)."""

    observation: dict[str, Any]
    reward: float | None = None
    done: bool = False


class ErrorBody(_Strict):
    detail: str
