"""`verigap ...`: a thin CLI. It parses, calls library functions and prints.

Each family adds its sub-commands in its own ``cli`` module; this file only mounts them.
"""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console

from verigap.errors import VerigapError
from verigap.patchworld.cli import app as patchworld_app
from verigap.patchworld.cli import pilot
from verigap.repos.cli import repos_app
from verigap.repos.redteam_cli import redteam

app = typer.Typer(
    name="verigap",
    help="RL environments for code agents that measure the gap between reward and truth.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
app.add_typer(patchworld_app, name="patchworld")
app.command("pilot")(pilot)


@app.command()
def report(runs_dir: Path = typer.Argument(..., help="a directory `verigap pilot` wrote"),
           out: Path | None = typer.Option(None, help="where to write (default RUNS_DIR/report)"),
           as_json: bool = typer.Option(False, "--json", help="print the per-setting table")
           ) -> None:
    """Build the static report (HTML + PNG figures) from results files only."""
    import json

    from verigap.report import build_report, load_runs, summary_table

    try:
        if as_json:
            print(json.dumps(summary_table(load_runs(runs_dir)), indent=2))
            return
        page = build_report(runs_dir, out)
    except VerigapError as e:
        Console().print(f"[red]error:[/red] {e}")
        raise typer.Exit(2) from None
    print(page.resolve())

app.add_typer(repos_app, name="repos")
app.command("redteam")(redteam)


def main() -> None:  # pragma: no cover - console entry
    app()


from verigap.sandbox.cli import app as sandbox_app  # noqa: E402 - kept apart from the family mounts

app.add_typer(sandbox_app, name="sandbox")
