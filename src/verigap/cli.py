"""`verigap ...`: a thin CLI. It parses, calls library functions and prints.

Each family (and the shared sandbox and report layers) defines its commands in its own ``cli``
module; this file only mounts them.
"""

from __future__ import annotations

import typer

from verigap.experiments.cli import app as experiments_app
from verigap.patchworld.cli import app as patchworld_app
from verigap.patchworld.cli import pilot
from verigap.report.cli import report
from verigap.repos.cli import repos_app
from verigap.repos.redteam_cli import redteam
from verigap.sandbox.cli import app as sandbox_app
from verigap.silentbug.cli import app as silentbug_app

app = typer.Typer(
    name="verigap",
    help="RL environments for code agents that measure the gap between reward and truth.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
app.add_typer(patchworld_app, name="patchworld")
app.command("pilot")(pilot)
app.command("report")(report)
app.add_typer(repos_app, name="repos")
app.command("redteam")(redteam)
app.add_typer(silentbug_app, name="silentbug")
app.add_typer(sandbox_app, name="sandbox")
app.add_typer(experiments_app, name="experiments")


def main() -> None:  # pragma: no cover - console entry
    app()
