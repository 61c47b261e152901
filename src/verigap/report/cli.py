"""`verigap report`, `verigap docs`, `verigap site`: everything a person reads, from results files.

Bad input raises ``VerigapError``; the root command prints it as one line and exits 2.
"""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.console import Console

from verigap.errors import ConfigError

console = Console()


def report(
    runs_dir: Path = typer.Argument(..., help="a directory `verigap pilot` wrote"),
    out: Path | None = typer.Option(None, help="where to write (default RUNS_DIR/report)"),
    as_json: bool = typer.Option(False, "--json", help="print the per-setting table"),
) -> None:
    """Build the static pilot report (HTML + PNG figures) from run directories only.

    Example: verigap report runs/pilot --json
    """
    from verigap.report.pilot import build_report, load_runs, summary_table

    if as_json:
        print(json.dumps(summary_table(load_runs(runs_dir)), indent=2))
        return
    print(build_report(runs_dir, out).resolve())


def docs(
    files: list[Path] | None = typer.Argument(
        None, help="Markdown files (default: README.md and docs/*.md)"
    ),
    check: bool = typer.Option(
        False, "--check", help="change nothing; exit 1 if a number disagrees with results/"
    ),
    root: Path = typer.Option(Path("."), help="repository root (results paths are relative to it)"),
    as_json: bool = typer.Option(False, "--json", help="print the stale files as JSON"),
) -> None:
    """Fill the results markers in README.md and docs/ from results/ (see docs/results.md).

    Example: verigap docs --check   (what the test suite runs)
    """
    from verigap.report.docs import doc_files, sync

    targets = list(files) if files else doc_files(root)
    missing = [str(f) for f in targets if not Path(f).is_file()]
    if missing:
        raise ConfigError(
            f"no such Markdown file(s): {', '.join(missing)}; pass existing files "
            "or none (README.md and docs/*.md)"
        )
    stale = sync(targets, root, write=not check)
    if as_json:
        print(
            json.dumps(
                {
                    "checked": [str(f) for f in targets],
                    "stale": [str(f) for f in stale],
                    "written": not check,
                },
                indent=2,
            )
        )
    elif check:
        for f in stale:
            console.print(
                f"{f}: numbers disagree with results/; run `verigap docs`", soft_wrap=True
            )
        if not stale:
            console.print(f"{len(targets)} file(s) agree with results/")
    else:
        console.print(f"rewrote {len(stale)} of {len(targets)} file(s)")
    if check and stale:
        raise typer.Exit(1)


def site(
    out: Path = typer.Option(Path("site"), help="where to write the site"),
    results_dir: Path = typer.Option(Path("results"), "--results", help="results folder"),
    runs: Path = typer.Option(Path("runs"), help="run directories (used where present)"),
    as_json: bool = typer.Option(False, "--json", help="print the pages as JSON"),
) -> None:
    """Build one static site (pages, figures, captions, navigation) from results/ and runs/.

    Example: verigap site --out site && chromium site/index.html
    """
    from verigap.report.site import build_site

    pages = build_site(out, results_dir=results_dir, runs_dir=runs)
    if as_json:
        print(json.dumps([{"path": str(out / p.file), "title": p.title} for p in pages], indent=2))
        return
    for p in pages:
        console.print(f"{p.title}: {out / p.file}")
    console.print(f"site: {(out / 'index.html').resolve()}")
