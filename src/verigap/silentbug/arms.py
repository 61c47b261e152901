"""Observation arms of the silent-bug benchmark, as a registry of typed values.

An arm says what the agent is given: the workspace's files (read and edit, so it can fix),
training runs, the logged metrics and metric plots. The episode, the scripted agents, the
scoring and the analysis consult these flags instead of comparing letters, so a new arm is
one ``register`` call (and its name in results stays the short string).
"""

from __future__ import annotations

from dataclasses import dataclass

from verigap.errors import ConfigError


@dataclass(frozen=True)
class Arm:
    """What one arm gives the agent; ``name`` is what run directories and results record."""

    name: str
    files: bool
    """list/read/edit/write the workspace: the agent can fix and must localize"""
    run: bool
    """train the workspace's code in the sandbox"""
    metrics: bool
    """read the metrics a run logged"""
    plots: bool
    """plot those metrics as an image"""
    tools: str = ""
    """what the prompt tells the agent it can do, in words"""


_REGISTRY: dict[str, Arm] = {}


def register(arm: Arm) -> Arm:
    """Add ``arm``; a second arm under a taken name is a mistake, not an override."""
    if not arm.name or "," in arm.name or arm.name != arm.name.strip().upper():
        raise ConfigError(f"arm name {arm.name!r}: use a short upper-case name without commas")
    if arm.name in _REGISTRY and _REGISTRY[arm.name] != arm:
        raise ConfigError(f"arm {arm.name!r} is already registered; pick another name")
    _REGISTRY[arm.name] = arm
    return arm


def unregister(name: str) -> None:
    """Remove an arm (for tests that register one of their own)."""
    _REGISTRY.pop(name, None)


def names() -> tuple[str, ...]:
    """The registered arm names, in registration order."""
    return tuple(_REGISTRY)


def get(name: str | Arm) -> Arm:
    """The arm called ``name`` (case-insensitive); an ``Arm`` is returned as it is."""
    if isinstance(name, Arm):
        return name
    key = str(name).strip().upper()
    if key not in _REGISTRY:
        raise ConfigError(f"unknown arm {name!r}; choose from {', '.join(_REGISTRY)}")
    return _REGISTRY[key]


def parse_arms(spec: str) -> list[str]:
    """Names from a comma-separated list such as ``"A,B,C,D"`` (validated, upper-cased)."""
    arms = [a.strip().upper() for a in spec.split(",") if a.strip()]
    bad = [a for a in arms if a not in _REGISTRY]
    if bad or not arms:
        raise ConfigError(f"unknown arm(s) {bad or spec!r}; choose from {', '.join(_REGISTRY)}")
    return arms


A = register(
    Arm(
        "A",
        files=True,
        run=True,
        metrics=False,
        plots=False,
        tools="read and edit files (list_files, read_file, edit_file, write_file) and run "
        "training (run_training, which returns the tail of the run's output and its "
        "final returns)",
    )
)
B = register(
    Arm(
        "B",
        files=True,
        run=True,
        metrics=True,
        plots=False,
        tools="read and edit files, run training, and read any logged metric of a run "
        "(list_metric_keys, get_metrics)",
    )
)
C = register(
    Arm(
        "C",
        files=True,
        run=True,
        metrics=True,
        plots=True,
        tools="read and edit files, run training, read logged metrics, and plot them "
        "(plot_metrics returns PNG images)",
    )
)
D = register(
    Arm(
        "D",
        files=False,
        run=True,
        metrics=True,
        plots=False,
        tools="run training and read its logged metrics (list_metric_keys, get_metrics). You "
        "cannot see or edit the code: diagnose only",
    )
)
