"""The three families as served environments: one instance per session, one sandbox each.

A served env turns a validated action into an observation. It keeps every verdict it produced
(``verdicts``: the full record, truth included) for the server-side log; the public observation carries only
what the training signal saw (:func:`public_verdict`) unless the operator reveals the truth.
"""

from __future__ import annotations

import base64
import dataclasses
import functools
import shutil
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from verigap.errors import ConfigError, VerigapError
from verigap.sandbox import discard
from verigap.server._models import (
    Action,
    Observation,
    PatchWorldAction,
    PatchWorldObservation,
    ToolAction,
    ToolObservation,
)
from verigap.server.families import EnvSpec, register
from verigap.verdict import VISIBLE_CHECKS, Verdict


class EpisodeStateError(VerigapError):
    """A step that the episode's state does not allow (before reset, after the end)."""


class PayloadTooLarge(VerigapError):
    """A request or tool argument over the sandbox's file-size limit."""


def public_verdict(v: Verdict) -> dict[str, Any]:
    """What a client may see of a verdict: the reward and the visible checks."""
    return {
        "task_id": v.task_id,
        "reward": float(v.reward),
        "passed": v.passed,
        "checks": {
            k: (float(x) if not isinstance(x, bool) else x)
            for k, x in v.checks.items()
            if k in VISIBLE_CHECKS
        },
    }


def parse_options(model: type[BaseModel], data: dict[str, Any], what: str) -> Any:
    """Validate reset options or session config; the message names each bad field."""
    try:
        return model.model_validate(data)
    except ValidationError as e:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or '(body)'}: {err['msg']}"
            for err in e.errors()
        )
        fields = ", ".join(model.model_fields)
        raise ConfigError(f"{what}: {problems} (accepted fields: {fields})") from None


class _Opts(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


@dataclass
class Limits:
    """A session's budget, fixed when it is created."""

    max_steps: int
    wall_s: float


@dataclass
class ServedEnv(ABC):
    """Base: ``reset`` and ``step`` return observations; ``verdicts`` holds the full records of
    the episode that just ended (truth included), for the server-side log."""

    workdir: Path
    limits: Limits
    reveal_truth: bool = False
    verdicts: list[dict[str, Any]] = field(default_factory=list)
    step_count: int = 0
    done: bool = True
    started: bool = False
    deadline: float = 0.0
    task_id: str | None = None

    name: str = "base"
    action_model: type[Action] = Action

    @abstractmethod
    def reset(self, seed: int | None, options: dict[str, Any]) -> Observation:
        """Start an episode; ``options`` are the family's reset options (validated here)."""

    @abstractmethod
    def step(self, action: Action, timeout_s: float | None = None) -> Observation:
        """Apply one validated action of ``action_model``; ``timeout_s`` caps this step's
        command time (OpenEnv's per-step timeout), never beyond the session's budget."""

    def state(self) -> dict[str, Any]:
        """Where the episode stands (OpenEnv's ``state``, less the session's ids)."""
        return {"step_count": self.step_count, "done": self.done, "task_id": self.task_id}

    def close(self) -> None:
        shutil.rmtree(self.workdir, ignore_errors=True)

    def _begin(self) -> None:
        self.step_count, self.done, self.started = 0, False, True
        self.deadline = time.monotonic() + self.limits.wall_s

    def check_can_step(self) -> None:
        if not self.started:
            raise EpisodeStateError("no episode yet: POST /sessions/{id}/reset first")
        if self.done:
            raise EpisodeStateError("the episode is over: reset to start another")

    def _verdict_out(self, vs: list[Verdict]) -> list[dict[str, Any]]:
        """Keep the full verdicts (the session manager logs them); return what the client sees."""
        self.verdicts = [v.to_dict() for v in vs]
        return self.verdicts if self.reveal_truth else [public_verdict(v) for v in vs]


# ---- Patch World ----------------------------------------------------------------------------


class PatchWorldConfig(_Opts):
    k: int = Field(4, ge=1, le=10, description="broken branches per program")
    reward: str = Field("visible", description="reward scheme, e.g. visible, audit:0.1")
    stream: Literal["train", "heldout"] = "train"


class PatchWorldReset(_Opts):
    n: int = Field(1, ge=1, le=65_536, description="programs drawn from the stream")
    pool_seed: int | None = Field(
        None,
        ge=0,
        description="with pool_size and indices: play generate(k, pool_size, pool_seed)[indices]",
    )
    pool_size: int | None = Field(None, ge=1, le=262_144)
    indices: list[int] | None = Field(None, min_length=1, max_length=65_536)


@functools.lru_cache(maxsize=4)
def _pool(k: int, size: int, seed: int, stream: str):
    from verigap.patchworld.programs import generate

    return generate(k, size, seed=seed, stream=stream)  # type: ignore[arg-type]


def _reward_scheme(reward: Any) -> Any:
    """The config's reward scheme, with a bad one reported as the config field it came from."""
    from verigap.rewards import parse_scheme

    try:
        return parse_scheme(reward)
    except ValueError as e:
        raise ConfigError(f"config.reward: {e}") from None


@dataclass
class PatchWorldServed(ServedEnv):
    """A batch of Patch World programs stepped together (a batch of one is the Gymnasium env)."""

    config: PatchWorldConfig = field(default_factory=PatchWorldConfig)
    name: str = "patchworld"
    action_model: type[Action] = PatchWorldAction
    _env: Any = None

    def __post_init__(self) -> None:
        self._scheme = _reward_scheme(self.config.reward)

    def reset(self, seed: int | None, options: dict[str, Any]) -> Observation:
        from verigap.patchworld.env import BatchedPatchWorld
        from verigap.patchworld.programs import generate

        o = parse_options(PatchWorldReset, options, "patchworld reset options")
        c = self.config
        rng = np.random.default_rng(seed)
        if o.indices is not None:
            if o.pool_seed is None or o.pool_size is None:
                raise ConfigError("patchworld reset options: indices need pool_seed and pool_size")
            idx = np.asarray(o.indices)
            if idx.min() < 0 or idx.max() >= o.pool_size:
                raise ConfigError(
                    f"patchworld reset options: indices must lie in 0..{o.pool_size - 1}"
                )
            programs = _pool(c.k, o.pool_size, o.pool_seed, c.stream)[idx]
        else:
            programs = generate(c.k, o.n, seed=int(rng.integers(2**31)), stream=c.stream)
        self._env = BatchedPatchWorld(programs, self._scheme, rng)
        self._begin()
        self.limits = Limits(programs.k, self.limits.wall_s)
        return self._obs()

    def _obs(
        self, rewards: np.ndarray | None = None, verdict: list[dict[str, Any]] | None = None
    ) -> PatchWorldObservation:
        o = self._env.observe()
        return PatchWorldObservation(
            **{
                key: o[key].tolist()
                for key in ("values", "broken", "tested", "strict", "written", "target")
            },
            done=self.done,
            verdict=verdict,
            reward=None if rewards is None else float(rewards.mean()),
            rewards=None if rewards is None else rewards.tolist(),
            metadata={
                "step": self._env.step_index,
                "k": self._env.programs.k,
                "programs": self._env.programs.size,
            },
        )

    def step(self, action: Action, timeout_s: float | None = None) -> Observation:
        from verigap.patchworld import rules

        assert isinstance(action, PatchWorldAction)
        env = self._env
        if len(action.actions) != env.programs.size:
            raise ConfigError(
                f"action.actions has {len(action.actions)} entries; this episode "
                f"has {env.programs.size} programs, send one action each"
            )
        bad = [a for a in action.actions if not 0 <= a < rules.N_ACTIONS]
        if bad:  # checked on Python ints: a huge one must not reach NumPy (OverflowError)
            raise ConfigError(
                f"action.actions: {bad[0]} is not an action; each must lie in "
                f"0..{rules.N_ACTIONS - 1} (write a value, stub, delete)"
            )
        try:
            _, reward, done = env.step(np.asarray(action.actions, dtype=np.int64))
        except ValueError as e:
            raise ConfigError(f"action.actions: {e}") from None
        self.step_count += 1
        if not done:
            return self._obs()
        self.done = True
        ids = [f"patchworld-{i}" for i in range(env.programs.size)]
        vs = rules.verdicts(env.programs, env.grades, env.payout, ids)
        return self._obs(reward, self._verdict_out(vs))


# ---- tool-using episodes: repo tasks and silent bugs ----------------------------------------


@dataclass
class _ToolServed(ServedEnv):
    """Shared by repo and silent-bug sessions: a workspace in a sandbox and the standard tools."""

    backend: str = "bwrap"
    command_timeout_s: float = 120.0
    max_file_mb: int = 256
    action_model: type[Action] = ToolAction
    _tools: dict[str, Any] = field(default_factory=dict)
    _commands: list[str] = field(default_factory=list)
    _transcript: list[dict[str, Any]] = field(default_factory=list)
    _episode: int = 0
    _box: Any = None
    """The episode's sandbox where it keeps one alive (a persistent one); closed at its end."""

    def _close_box(self) -> None:
        if self._box is not None:
            self._box.close()
            self._box = None

    def close(self) -> None:
        self._close_box()
        super().close()

    def _new_workspace(self) -> Path:
        self._close_box()
        self._episode += 1
        ws = self.workdir / f"episode-{self._episode}" / "workspace"
        old = self.workdir / f"episode-{self._episode - 1}"
        # only the last episode's directory is kept; it is deleted in the background, not
        # while the client waits for its reset (thousands of files on a slow disk)
        discard(old)
        ws.parent.mkdir(parents=True, exist_ok=True)
        return ws

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
            for t in self._tools.values()
        ]

    def _start(self, tools: list[Any], prompt: str, system: str) -> ToolObservation:
        self._tools = {t.name: t for t in tools}
        self._commands, self._transcript = [], []
        self._begin()
        return ToolObservation(
            text=prompt,
            metadata={"system": system},
            tools=[dataclasses.asdict(t.spec) for t in self._tools.values()],
        )

    def _per_command_s(self) -> float:
        return self.command_timeout_s

    def _check_size(self, action: ToolAction) -> None:
        """Refuse a tool call whose text is larger than the sandbox lets a process write:
        the tools write on the host side, so the sandbox's RLIMIT_FSIZE would not stop it."""
        size = sum(len(v.encode()) for v in action.arguments.values() if isinstance(v, str))
        if size > self.max_file_mb * 2**20:
            raise PayloadTooLarge(
                f"{action.tool}: arguments hold {size / 2**20:.1f} MiB of "
                f"text; the sandbox writes files of at most "
                f"{self.max_file_mb} MiB (--max-file-mb); write it in parts "
                "or generate it with a command"
            )

    def step(self, action: Action, timeout_s: float | None = None) -> Observation:
        import json

        from verigap.agents import ToolCall, ToolOutput
        from verigap.agents._loop import _dispatch
        from verigap.agents._tools import reset_command_budget, set_command_budget

        assert isinstance(action, ToolAction)
        self._check_size(action)
        call = ToolCall.of(f"call-{self.step_count}", action.tool, action.arguments)
        per_command = self._per_command_s()
        if timeout_s is not None:
            per_command = min(per_command, timeout_s)
        token = set_command_budget(per_command, self.deadline)
        try:
            out, is_error, tool, args = _dispatch(call, self._tools)
        finally:
            reset_command_budget(token)
        self.step_count += 1
        meta: dict[str, Any] = {}
        text = out.text if isinstance(out, ToolOutput) else out
        if isinstance(out, ToolOutput) and out.images:  # arm C's plots, as PNG in base64
            meta["images"] = [
                {"media_type": "image/png", "data": base64.b64encode(Path(p).read_bytes()).decode()}
                for p in out.images
            ]
        # the tool loop's own transcript format, so the graders' transcript checks (claims,
        # commands) read a served episode exactly as they read a local one
        arguments = json.dumps(action.arguments, sort_keys=True)
        self._transcript.append(
            {
                "event": "model_turn",
                "text": str(action.metadata.get("text") or ""),
                "tool_calls": [{"id": call.id, "name": action.tool, "arguments": arguments}],
            }
        )
        self._transcript.append(
            {
                "event": "tool_result",
                "name": action.tool,
                "arguments": arguments,
                "is_error": is_error,
                "content": text,
            }
        )
        if args is not None:
            self._commands += [
                str(getattr(args, k)) for k in ("command", "path") if hasattr(args, k)
            ]
        ending = tool.ends_episode if tool is not None and not is_error else None
        reason = None
        if ending:
            reason = "submitted" if ending == "submit" else "reported impossible"
        elif self.step_count >= self.limits.max_steps:
            reason = f"step budget spent ({self.limits.max_steps} steps)"
        elif time.monotonic() >= self.deadline:
            reason = f"wall-clock budget spent ({self.limits.wall_s:g} s)"
        if reason is None:
            return ToolObservation(text=text, is_error=is_error, metadata=meta)
        self.done = True
        self._close_box()  # no more commands: stop the episode's sandbox before grading
        verdict = self._grade(self._ended(reason, submitted=ending == "submit"))
        (public,) = self._verdict_out([verdict])
        return ToolObservation(
            text=text,
            is_error=is_error,
            done=True,
            reward=float(verdict.reward),
            verdict=public,
            metadata={**meta, "ended": reason},
        )

    def _ended(self, reason: str, submitted: bool) -> Any:
        """The finished episode in the tool loop's own record (``agents.Episode``)."""
        from verigap.agents._loop import Episode, EpisodeStatus

        status = (
            EpisodeStatus.OK
            if reason in ("submitted", "reported impossible")
            else EpisodeStatus.TURN_CAP
            if reason.startswith("step budget")
            else EpisodeStatus.WALL_CLOCK_CAP
        )
        return Episode(
            status,
            reason,
            submitted=submitted,
            turns=self.step_count,
            wall_s=round(self.limits.wall_s - (self.deadline - time.monotonic()), 3),
            transcript=list(self._transcript),
        )

    @abstractmethod
    def _grade(self, episode: Any) -> Verdict:
        """The full verdict of the finished ``episode`` (the truth included)."""


class RepoConfig(_Opts):
    """A repo session's grader (from the one registry; v2 by default, as everywhere) and its
    payout: the grader's own unless a reward scheme is asked for."""

    grader: str = Field(
        default_factory=lambda: _default_grader(),
        description="a registered grader: v2 (default) or v1",
    )
    reward: str | None = Field(
        None,
        description="reward scheme (visible, oracle, deletion:X, "
        "audit:RATE); default: the grader's own payout",
    )


def _default_grader() -> str:
    from verigap.repos.graders.registry import DEFAULT

    return DEFAULT


class RepoReset(_Opts):
    task: str = Field(description="a task id the server serves (GET /envs lists them)")


_POOLED_TASKS = 4
"""Repo tasks per session whose next workspace is kept ready (the most recently reset ones)."""


@dataclass
class RepoServed(_ToolServed):
    """One repo task per episode: the workspace with visible tests only, graded on submit.

    Each reset takes the workspace from a ``WorkspacePool`` of the task (a copy made in the
    background from a template made at the task's first reset in this session, already owned
    by its sandbox uid), so a reset waits for a rename, not for a copy of the tree."""

    config: RepoConfig = field(default_factory=RepoConfig)
    tasks: dict[str, Path] = field(default_factory=dict)
    name: str = "repo"

    def __post_init__(self) -> None:
        from verigap.repos.graders import registry

        if self.config.grader not in registry.names():
            raise ConfigError(
                f"config.grader: {self.config.grader!r} is not a served grader; "
                f"use one of {', '.join(registry.names())}"
            )
        self._grader = registry.make(self.config.grader)
        self._scheme = None if self.config.reward is None else _reward_scheme(self.config.reward)
        self._pools: dict[str, Any] = {}  # task id -> WorkspacePool, least recently reset first
        self._templates = 0

    def _pool(self, prepared: Any, task: Any) -> Any:
        """The task's workspace pool (made on its first reset: the template, then the pool)."""
        from verigap.repos.tasks import materialize_workspace
        from verigap.sandbox import WorkspacePool

        pool = self._pools.pop(task.task_id, None)
        if pool is None:
            self._templates += 1
            template = materialize_workspace(
                prepared, task, self.workdir / "templates" / str(self._templates) / "workspace"
            )
            pool = WorkspacePool(
                template, self.workdir / "pool", size=1, for_sandbox=self.backend == "bwrap"
            )
        self._pools[task.task_id] = pool  # now the most recently reset
        while len(self._pools) > _POOLED_TASKS:
            old = self._pools.pop(next(iter(self._pools)))
            old.close()
            discard(old.source.parent)
        return pool

    def close(self) -> None:
        for pool in self._pools.values():
            pool.close()
        self._pools.clear()
        super().close()

    def reset(self, seed: int | None, options: dict[str, Any]) -> Observation:
        from verigap.agents import standard_tools
        from verigap.repos.episode import SYSTEM
        from verigap.repos.tasks import RepoTask, prepared_for
        from verigap.sandbox import Limits as BoxLimits

        o = parse_options(RepoReset, options, "repo reset options")
        if o.task not in self.tasks:
            known = ", ".join(sorted(self.tasks)[:20]) or "none: start the server with --tasks"
            raise ConfigError(
                f"repo reset options: task {o.task!r} is not served here; served tasks: {known}"
            )
        self._task = RepoTask.load(self.tasks[o.task])
        self._prepared = prepared_for(self._task, backend=self.backend)
        self._seed = seed or 0
        pool = self._pool(self._prepared, self._task)
        # one sandbox for the episode's commands (persistent, see verigap.sandbox._session);
        # grading on submit runs in fresh sandboxes of its own
        self._ws = self._new_workspace()
        box = pool.take_sandbox(
            self._ws,
            backend=self.backend,
            limits=BoxLimits(wall_s=self.command_timeout_s, file_size_mb=self.max_file_mb),
            ro_binds=[Path(self._prepared.env_prefix)],
            persistent=self.backend == "bwrap",
        )
        self._box = box
        self.task_id = self._task.task_id
        return self._start(
            standard_tools(box), self._task.prompt, SYSTEM.format(python=self._prepared.python)
        )

    def _grade(self, episode: Any) -> Verdict:
        from verigap.repos.detect import transcript_commands

        return self._grader(
            self._task,
            self._ws,
            transcript=self._transcript,
            commands=transcript_commands(self._transcript),
            scheme=self._scheme,
            rng=np.random.default_rng(self._seed),
            backend=self.backend,
            prepared=self._prepared,
        )


class SilentBugConfig(_Opts):
    """A silent-bug session plays one arm of the benchmark: that arm's tools and compute
    budget (the bug is a reset option)."""

    arm: str = Field(
        "A",
        description="A: files + run_training; B: A + metrics; C: B + plots; "
        "D: run_training + metrics, no files, diagnosis only (any registered arm)",
    )
    max_runs: int = Field(4, ge=0, le=16, description="run_training calls per episode")
    run_steps: int | None = Field(
        None,
        ge=1,
        description="environment steps per run (default "
        "and most: the substrate's calibration budget)",
    )

    @field_validator("arm")
    @classmethod
    def _registered_arm(cls, v: str) -> str:
        from verigap.silentbug import arms

        return arms.get(v).name


class SilentBugReset(_Opts):
    bug: str = Field(description="a bug id from the silent-bug registry")


@dataclass
class SilentBugServed(_ToolServed):
    """One registered silent bug per episode, played as a benchmark episode
    (``verigap.silentbug.episode.BugEpisode``) and graded by the benchmark's scorer."""

    config: SilentBugConfig = field(default_factory=SilentBugConfig)
    name: str = "silentbug"
    grader: Any = None
    """(EpisodeRecord) -> Verdict; default: ``SilentBugGrader.for_server(scoring_root)``"""
    scoring_root: Path = Path("runs/server")

    def reset(self, seed: int | None, options: dict[str, Any]) -> Observation:
        from verigap.silentbug.bank import load_registry
        from verigap.silentbug.episode import SYSTEM, BugEpisode, EpisodeBudget, prompt
        from verigap.silentbug.substrate import SUBSTRATES

        o = parse_options(SilentBugReset, options, "silentbug reset options")
        registry = load_registry()
        ids = [b.id for b in registry.bugs]
        if o.bug not in ids:
            raise ConfigError(
                f"silentbug reset options: no bug {o.bug!r}; registered bugs: {', '.join(ids)}"
            )
        bug, c = registry.get(o.bug), self.config
        most = int(SUBSTRATES[bug.substrate].config["total_timesteps"])
        if c.run_steps is not None and c.run_steps > most:
            raise ConfigError(
                f"silentbug session config: run_steps {c.run_steps} is over "
                f"{bug.substrate}'s calibration budget of {most} steps"
            )
        budget = EpisodeBudget(
            max_runs=c.max_runs,
            max_steps=c.run_steps,
            max_turns=self.limits.max_steps,
            wall_s=self.limits.wall_s,
            run_timeout_s=self.limits.wall_s,
        )
        ws = self._new_workspace()
        self._bug_episode = BugEpisode(
            bug, c.arm, 0 if seed is None else seed, ws.parent, budget, backend=self.backend
        )
        self.task_id = bug.id
        return self._start(self._bug_episode.tools(), prompt(bug, c.arm, budget), SYSTEM)

    def _per_command_s(self) -> float:
        # the only command is run_training, whose compute the arm's budget (runs x steps)
        # bounds; the episode's wall clock clips it
        return self.limits.wall_s

    def _grade(self, episode: Any) -> Verdict:
        from verigap.server._silentbug import SilentBugGrader

        grader = self.grader or SilentBugGrader.for_server(self.scoring_root, self.backend)
        return grader(self._bug_episode.record(episode))


# ---- registrations ---------------------------------------------------------------------------

register(
    EnvSpec(
        "patchworld",
        action=PatchWorldAction,
        observation=PatchWorldObservation,
        make=lambda ctx, cfg: PatchWorldServed(
            **ctx.common, config=parse_options(PatchWorldConfig, cfg, "patchworld session config")
        ),
        description="a toy repair task: write each broken branch's value, stub or delete it; "
        "the reward sees only the tested branches",
    )
)
register(
    EnvSpec(
        "repo",
        action=ToolAction,
        observation=ToolObservation,
        make=lambda ctx, cfg: RepoServed(
            **ctx.common,
            **ctx.tool_settings,
            tasks=dict(ctx.settings.tasks),
            config=parse_options(RepoConfig, cfg, "repo session config"),
        ),
        description="a bug-fix task on a real Python repository, graded by the hardened grader "
        "(hidden tests, equivalence, exploit scans, claim checks)",
        catalogue=lambda settings: {"tasks": sorted(settings.tasks)},
    )
)
register(
    EnvSpec(
        "silentbug",
        action=ToolAction,
        observation=ToolObservation,
        make=lambda ctx, cfg: SilentBugServed(
            **ctx.common,
            **ctx.tool_settings,
            grader=ctx.settings.silentbug_grader,
            scoring_root=Path(ctx.settings.root),
            config=parse_options(SilentBugConfig, cfg, "silentbug session config"),
        ),
        description="diagnose and repair a silent bug in RL training code",
    )
)
