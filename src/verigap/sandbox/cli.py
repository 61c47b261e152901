"""`verigap sandbox ...`: check that the sandbox keeps its promises on this machine."""

from __future__ import annotations

import typer
from rich.console import Console
from rich.table import Table

from verigap.errors import SandboxUnavailable

app = typer.Typer(help="Sandboxed workspaces: check this machine.", no_args_is_help=True)
console = Console()


@app.command()
def check(backend: str = typer.Option("bwrap", help="bwrap (isolated) or unsafe")) -> None:
    """Try each containment promise for real (network, files, limits); exit 1 if one fails."""
    from verigap.sandbox._check import self_check

    try:
        results = self_check(backend)
    except SandboxUnavailable as e:
        console.print(f"[red]sandbox unavailable:[/red] {e}")
        raise typer.Exit(2) from None
    table = Table("check", "result", "seen", title=f"sandbox self-check ({backend})")
    for c in results:
        table.add_row(c.name, "[green]ok[/green]" if c.passed else "[red]FAIL[/red]", c.detail)
    console.print(table)
    failed = [c for c in results if not c.passed]
    if failed:
        console.print(f"[red]{len(failed)} of {len(results)} checks failed[/red]")
        raise typer.Exit(1)
    console.print(f"all {len(results)} checks passed")
