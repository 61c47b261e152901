"""The experiment log: pre-registered predictions on the Patch World trainer, with verdicts
computed in code from structured refutation criteria."""

from verigap.experiments.registry import DEFAULT_REGISTRY, Registry, load_registry, parse_registry
from verigap.experiments.runner import run_log
from verigap.experiments.verdicts import decide, merge_entries, status

__all__ = [
    "DEFAULT_REGISTRY",
    "Registry",
    "decide",
    "load_registry",
    "merge_entries",
    "parse_registry",
    "run_log",
    "status",
]
