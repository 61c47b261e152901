"""`verigap ...`: a thin CLI. It parses, calls library functions and prints.

Each family adds its sub-commands in its own ``cli`` module; this file only mounts them.
"""

from __future__ import annotations

import typer

from verigap.silentbug.cli import app as silentbug_app

app = typer.Typer(
    name="verigap",
    help="RL environments for code agents that measure the gap between reward and truth.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
app.add_typer(silentbug_app, name="silentbug")


def main() -> None:  # pragma: no cover - console entry
    app()
