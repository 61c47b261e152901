"""`verigap sandbox ...`: check that the sandbox keeps its promises on this machine."""

from __future__ import annotations

import json

import typer
from rich.console import Console
from rich.table import Table

app = typer.Typer(help="Sandboxed workspaces: check this machine.", no_args_is_help=True)
console = Console()


@app.command()
def check(
    backend: str = typer.Option("bwrap", help="bwrap (isolated) or unsafe"),
    as_json: bool = typer.Option(False, "--json", help="print JSON instead of a table"),
    persistent: bool = typer.Option(
        False, "--persistent", help="check bwrap's persistent mode (one sandbox per session)"
    ),
) -> None:
    """Try each containment promise for real (network, files, limits); exit 1 if one fails.

    Example: verigap sandbox check --backend bwrap
    """
    from verigap.sandbox._check import self_check

    # SandboxUnavailable: `error: ...`, exit 2 (the root's path)
    results = self_check(backend, persistent=True) if persistent else self_check(backend)
    failed = [c for c in results if not c.passed]
    if as_json:
        print(
            json.dumps(
                [{"check": c.name, "passed": c.passed, "seen": c.detail} for c in results], indent=2
            )
        )
    else:
        mode = f"{backend}, persistent" if persistent else backend
        table = Table("check", "result", "seen", title=f"sandbox self-check ({mode})")
        for c in results:
            table.add_row(c.name, "[green]ok[/green]" if c.passed else "[red]FAIL[/red]", c.detail)
        console.print(table)
        console.print(
            f"[red]{len(failed)} of {len(results)} checks failed[/red]"
            if failed
            else f"all {len(results)} checks passed"
        )
    if failed:
        raise typer.Exit(1)
