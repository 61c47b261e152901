"""`verigap report RUNS_DIR`: the static pilot report, from results files only."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.console import Console

from verigap.errors import VerigapError


def report(runs_dir: Path = typer.Argument(..., help="a directory `verigap pilot` wrote"),
           out: Path | None = typer.Option(None, help="where to write (default RUNS_DIR/report)"),
           as_json: bool = typer.Option(False, "--json", help="print the per-setting table")
           ) -> None:
    """Build the static report (HTML + PNG figures) from results files only."""
    from verigap.report.pilot import build_report, load_runs, summary_table

    try:
        if as_json:
            print(json.dumps(summary_table(load_runs(runs_dir)), indent=2))
            return
        page = build_report(runs_dir, out)
    except VerigapError as e:
        Console().print(f"[red]error:[/red] {e}")
        raise typer.Exit(2) from None
    print(page.resolve())
