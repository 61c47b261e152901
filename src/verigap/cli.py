"""`verigap ...`: a thin CLI. It parses, calls library functions and prints.

Each family adds its sub-commands in its own ``cli`` module; this file only mounts them.
"""

from __future__ import annotations

import typer

from verigap.repos.cli import repos_app
from verigap.repos.redteam_cli import redteam

app = typer.Typer(
    name="verigap",
    help="RL environments for code agents that measure the gap between reward and truth.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)

app.add_typer(repos_app, name="repos")
app.command("redteam")(redteam)


def main() -> None:  # pragma: no cover - console entry
    app()


from verigap.sandbox.cli import app as sandbox_app  # noqa: E402 - kept apart from the family mounts

app.add_typer(sandbox_app, name="sandbox")
