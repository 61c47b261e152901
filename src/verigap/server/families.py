"""Environment families as a registry, Gymnasium-style: ``register`` a spec once, ``make`` it.

A family is served through an in-process environment (:class:`verigap.server._envs.ServedEnv`:
``reset``/``step``/``state`` over typed pydantic actions and observations). The server's
session manager, its ``/envs`` catalogue, the OpenEnv routes and the wire types all read this
registry, so serving a new family is its package plus one :func:`register` call::

    register(EnvSpec("counter", make=CounterEnv.from_context, action=CountAction,
                     observation=CountObservation, description="count to a target"))

The three built-in families register themselves at the bottom of ``_envs.py``, the workplace
in ``_workplace.py`` and the web-app feature tasks in ``_webapp.py`` (all imported by the
session manager, so a running server always has them).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from verigap.errors import ConfigError

if TYPE_CHECKING:
    from verigap.server._envs import Limits, ServedEnv
    from verigap.server._models import Action, Observation


@dataclass(frozen=True)
class EnvContext:
    """What the server gives a family when it opens a session: the session's own directory,
    its budget, and the server's settings (sandbox backend, tasks, graders, limits)."""

    workdir: Path
    limits: Limits
    settings: Any
    """the server's ``ServerConfig``: read what the family needs (backend, tasks, root ...)"""

    @property
    def common(self) -> dict[str, Any]:
        """The arguments every ``ServedEnv`` takes."""
        return dict(
            workdir=self.workdir, limits=self.limits, reveal_truth=self.settings.reveal_truth
        )

    @property
    def tool_settings(self) -> dict[str, Any]:
        """The sandbox settings of a tool-calling family."""
        s = self.settings
        return dict(
            backend=s.backend, command_timeout_s=s.command_timeout_s, max_file_mb=s.max_file_mb
        )


@dataclass(frozen=True)
class EnvSpec:
    """One family: its name (``/envs/{id}``), how a session makes it, and its wire types."""

    id: str
    make: Callable[[EnvContext, dict[str, Any]], ServedEnv]
    """``(context, session config) -> ServedEnv``; validates the config, naming bad fields"""
    action: type[Action]
    observation: type[Observation]
    description: str = ""
    catalogue: Callable[[Any], dict[str, Any]] = field(default=lambda settings: {})
    """extra entries of ``GET /envs`` for this family, from the server's settings"""


_REGISTRY: dict[str, EnvSpec] = {}


def register(spec: EnvSpec) -> EnvSpec:
    """Add a family; a different spec under a taken id is refused."""
    if not spec.id or not spec.id.replace("_", "").isalnum() or spec.id != spec.id.lower():
        raise ConfigError(f"family id {spec.id!r}: use lower-case letters, digits and _")
    if spec.id in _REGISTRY and _REGISTRY[spec.id] is not spec:
        raise ConfigError(f"family {spec.id!r} is already registered; pick another id")
    _REGISTRY[spec.id] = spec
    return spec


def unregister(env_id: str) -> None:
    """Remove a family (for tests that register one of their own)."""
    _REGISTRY.pop(env_id, None)


def names() -> tuple[str, ...]:
    """The registered family ids, built-ins first."""
    return tuple(_REGISTRY)


def spec(env_id: str) -> EnvSpec:
    """The spec of ``env_id``; an unknown id names the choices."""
    if env_id not in _REGISTRY:
        raise ConfigError(f"unknown env {env_id!r}; use {', '.join(_REGISTRY)} (/envs/{{env}}/...)")
    return _REGISTRY[env_id]


def make(env_id: str, context: EnvContext, config: dict[str, Any]) -> ServedEnv:
    """A new in-process environment of family ``env_id`` for one session."""
    return spec(env_id).make(context, config)


def known(env_id: str) -> str:
    """``env_id`` if registered (a pydantic validator for wire fields naming a family)."""
    spec(env_id)
    return env_id
