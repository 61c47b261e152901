"""Options every command group spells the same way, and hidden aliases for old spellings.

One spelling per idea: ``--save FILE`` writes a results file, ``--out DIR`` is a run (or
output) directory, ``--json`` prints JSON instead of a table. An old spelling stays as a
hidden option that still works, so nobody's scripts break; :func:`renamed` merges the two.
"""

from __future__ import annotations

from typing import Any, TypeVar

import typer

from verigap.errors import ConfigError

T = TypeVar("T")

JSON_HELP = "print JSON instead of a table"


def json_option() -> Any:
    """``--json``: print JSON instead of a table."""
    return typer.Option(False, "--json", help=JSON_HELP)


def hidden_alias(old: str, new: str) -> Any:
    """The old spelling ``old`` of ``new``: hidden from --help, still accepted."""
    return typer.Option(None, old, hidden=True, help=f"deprecated spelling of {new}")


def renamed(new_value: T | None, old_value: T | None, new: str, old: str) -> T | None:
    """The value given under the new or the old spelling (both at once: a one-line error)."""
    if old_value is None:
        return new_value
    if new_value is not None and new_value != old_value:
        raise ConfigError(f"{old} is the old spelling of {new}; give only {new}")
    return old_value
