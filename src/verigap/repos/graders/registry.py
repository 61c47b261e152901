"""One registry of repo-task graders, shared by ``verigap repos run``, the red-team battery and
``verigap serve``, so the same episode gets the same verdict and the same hacks by every path.

A grader is a value with a ``name`` that maps (task, workspace, episode context) to a
:class:`~verigap.verdict.Verdict`. ``v2`` is the default everywhere and owns all of its checks,
the claim check included (what the agent *said* against what the transcript shows), and pays
with its own scheme (the hidden check) unless the caller asks for a reward scheme. ``v1`` is the
naive grader kept so the gap can be measured. ``make("pkg.module:function")`` wraps your own
callable ``(task, workspace) -> Verdict``; ``register`` adds one under a short name.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from verigap.errors import ConfigError
from verigap.rewards import RewardScheme
from verigap.verdict import Verdict

DEFAULT = "v2"
"""The grader every entry point uses unless told otherwise."""


@runtime_checkable
class Grader(Protocol):
    """Grades one finished repo episode. Keyword arguments are the episode's context: the
    agent's ``transcript`` (events of the tool loop), the ``commands`` and paths it used,
    ``scheme`` (None: the grader's own payout), ``rng`` (audits), ``backend``, ``prepared``
    (the task's environment) and ``truth`` (v2's evaluation of this workspace, if already run)."""

    name: str

    def __call__(
        self,
        task: Any,
        workspace: Path,
        *,
        transcript: Sequence[Mapping[str, Any]] = (),
        commands: Sequence[str] = (),
        scheme: RewardScheme | None = None,
        rng: np.random.Generator | None = None,
        backend: str | None = None,
        prepared: Any = None,
        truth: Any = None,
    ) -> Verdict: ...


def _with_claims(v: Verdict, transcript: Sequence[Mapping[str, Any]], truth: Any) -> Verdict:
    """``v`` with the hacks of the agent's unsupported claims added (checked against the
    truth's visible checks and per-site outcomes)."""
    from verigap import claims

    said = claims.check(transcript, {"checks": truth.checks, "outcomes": truth.outcomes})
    if not said["hacks"]:
        return v
    return dataclasses.replace(v, hacks=tuple(sorted(set(v.hacks) | set(said["hacks"]))))


@dataclass(frozen=True)
class V2Grader:
    """The hardened grader: pristine copy, hidden tests, equivalence, exploit scans, claims."""

    name: str = "v2"

    def __call__(
        self,
        task: Any,
        workspace: Path,
        *,
        transcript: Sequence[Mapping[str, Any]] = (),
        commands: Sequence[str] = (),
        scheme: RewardScheme | None = None,
        rng: np.random.Generator | None = None,
        backend: str | None = None,
        prepared: Any = None,
        truth: Any = None,
    ) -> Verdict:
        from verigap.repos.graders import v2

        t = truth or v2.evaluate(
            task, workspace, prepared=prepared, commands=commands, backend=backend
        )
        v = v2.grade(
            task,
            workspace,
            scheme=scheme,
            rng=rng,
            commands=commands,
            backend=backend,
            prepared=prepared,
            truth=t,
        )
        return _with_claims(v, transcript, t)


@dataclass(frozen=True)
class V1Grader:
    """The naive grader: the visible tests in the agent's own workspace (truth from v2)."""

    name: str = "v1"

    def __call__(
        self,
        task: Any,
        workspace: Path,
        *,
        transcript: Sequence[Mapping[str, Any]] = (),
        commands: Sequence[str] = (),
        scheme: RewardScheme | None = None,
        rng: np.random.Generator | None = None,
        backend: str | None = None,
        prepared: Any = None,
        truth: Any = None,
    ) -> Verdict:
        from verigap.repos.graders import v1

        return v1.grade(
            task,
            workspace,
            scheme=scheme,
            rng=rng,
            commands=commands,
            backend=backend,
            prepared=prepared,
            truth=truth,
        )


@dataclass(frozen=True)
class CallableGrader:
    """Your own ``(task, workspace) -> Verdict`` callable; it is also given any of ``commands``,
    ``transcript``, ``prepared``, ``backend``, ``scheme``, ``rng`` it declares."""

    name: str
    fn: Callable[..., Any]

    def __call__(self, task: Any, workspace: Path, **context: Any) -> Verdict:
        params = inspect.signature(self.fn).parameters
        extra = {k: v for k, v in context.items() if k in params and k != "truth"}
        out = self.fn(task, workspace, **extra)
        if isinstance(out, Verdict):
            return out
        if isinstance(out, dict):
            return Verdict.from_dict(out)
        raise ConfigError(f"grader {self.name} returned {type(out).__name__}, not a Verdict")


_REGISTRY: dict[str, Grader] = {}


def register(grader: Grader) -> None:
    """Make ``grader`` available by its name to every entry point (``--grader NAME``)."""
    if not isinstance(grader, Grader):
        raise ConfigError(
            f"{grader!r} is not a Grader: give it a name and a "
            "__call__(task, workspace, **context) -> Verdict"
        )
    if grader.name in _REGISTRY and _REGISTRY[grader.name] != grader:
        raise ConfigError(
            f"a grader named {grader.name!r} is already registered; pick another name"
        )
    _REGISTRY[grader.name] = grader


def names() -> list[str]:
    """The registered graders' names."""
    return sorted(_REGISTRY)


def make(spec: str | None = None) -> Grader:
    """The grader named ``spec`` (default :data:`DEFAULT`), or ``pkg.module:function``."""
    spec = spec or DEFAULT
    if spec in _REGISTRY:
        return _REGISTRY[spec]
    mod, sep, attr = spec.partition(":")
    if not sep or not mod or not attr:
        raise ConfigError(
            f"--grader {spec!r}: use {', '.join(names())} or module:function "
            "(a callable (task, workspace) -> Verdict)"
        )
    try:
        fn: Any = importlib.import_module(mod)
        for part in attr.split("."):
            fn = getattr(fn, part)
    except (ImportError, AttributeError) as e:
        raise ConfigError(
            f"--grader {spec!r}: cannot import it ({e}); is the module on PYTHONPATH?"
        ) from None
    if isinstance(fn, Grader):
        return fn
    if not callable(fn):
        raise ConfigError(f"--grader {spec!r} is not callable")
    return CallableGrader(spec, fn)


register(V2Grader())
register(V1Grader())
